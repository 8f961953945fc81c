"""The ``trl-env`` exit codes, each situation through the real command (main(argv) or a subprocess).

0: the run worked; 1: it ran but failed (every eval episode, or more than --max-failure-rate of them,
failed in its env; training stopped on env failures; an env failed under --on-env-error raise); 2: a
command-line mistake; 3: the env broke the Env protocol. Every non-zero exit says why in one line on stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trl_env
from trl_env.cli import main

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--max-turns", "3", "--max-turn-tokens", "4", "--max-completion-tokens", "64"]


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the env factories are importable from the current directory


def _eval(model_dir, env: str, *extra: str) -> list[str]:
    # thread workers: no forkserver start per test (the default isolation is run by test_eval_cli)
    return [
        "eval",
        "--env",
        env,
        "--model",
        str(model_dir),
        *SMALL,
        "--no-progress",
        "--env-isolation",
        "thread",
        *extra,
    ]


def _train(model_dir, env: str, out: Path, *extra: str) -> list[str]:
    return [
        "train", "--env", env, "--model", str(model_dir), "--steps", "1", "--num-generations", "2",
        "--prompts-per-step", "1", *SMALL, "--env-isolation", "thread", "--output-dir", str(out), *extra,
    ]  # fmt: skip


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(trl_env.__file__).parents[1]), str(ROOT)])  # this trl_env
    command = [sys.executable, "-m", "trl_env.cli", *args]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("Loading weights")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


# --- exit 1: the run worked but failed -------------------------------------------------------------------------


def test_eval_exits_1_when_every_episode_failed(tiny_model_dir, capsys):
    # FailsAtReset parses the seed as an int: every eval-N seed fails at reset
    assert main(_eval(tiny_model_dir, "tests.envs.basic:FailsAtReset", "--episodes", "3")) == 1
    captured = capsys.readouterr()
    assert "env errors           3" in captured.out  # the summary is still printed
    line = _one_line(captured.err)
    assert "every episode failed in its env (3 of 3)" in line and "invalid literal for int()" in line


def test_eval_exits_1_above_the_failure_rate_and_0_below(tiny_model_dir, capsys):
    # SometimesBroken: every other env made in a process raises at its second step (thread workers: in this one)
    broken = ("tests.envs.basic:SometimesBroken", "--episodes", "4")
    assert main(_eval(tiny_model_dir, *broken, "--max-failure-rate", "0.25")) == 1
    line = _one_line(capsys.readouterr().err)
    assert "2 of 4 episodes failed in their env (more than --max-failure-rate 0.25)" in line
    assert main(_eval(tiny_model_dir, *broken)) == 0  # 2 of 4 is not above the default 0.5
    assert "env errors           2" in capsys.readouterr().out


def test_eval_exits_1_in_one_line_at_the_first_env_error_under_the_raise_policy(tiny_model_dir, capsys):
    assert main(_eval(tiny_model_dir, "tests.envs.basic:FailsAtReset", "--on-env-error", "raise")) == 1
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("trl-env: the env failed (--on-env-error raise): FailsAtReset (seed='eval-")
    assert "invalid literal for int()" in line


def test_eval_rejects_a_failure_rate_outside_0_1(tiny_model_dir, capsys):
    assert main(_eval(tiny_model_dir, "examples.guess_number:GuessNumberEnv", "--max-failure-rate", "2")) == 2
    assert "--max-failure-rate must be in [0, 1]" in _one_line(capsys.readouterr().err)


def test_train_exits_1_when_every_episode_failed(tiny_model_dir, tmp_path, capsys):
    assert main(_train(tiny_model_dir, "tests.envs.basic:FailsAtReset", tmp_path)) == 1
    err = capsys.readouterr().err
    assert "trl-env: training stopped: every episode of this step failed (2 of 2)" in err
    assert "Traceback" not in err and not (tmp_path / "final").exists()


# --- exit 2: a command-line mistake, found before any episode ----------------------------------------------------


@pytest.mark.parametrize(
    ("env", "kwargs", "message"),
    [
        (
            "examples.guess_number:GuessNumberEnv",
            '{"hihg": 8}',
            "--env-kwargs do not fit examples.guess_number:GuessNumberEnv: unexpected keyword argument 'hihg' "
            "(did you mean 'high'?)",
        ),
        ("tests.envs.basic:ChaosEnv", "{}", "missing a required argument: 'plan'"),
        (
            "tests.envs.flaky:counting_two",
            '{"turnz": 1}',
            "unexpected keyword argument 'turnz' (did you mean 'turns'?)",
        ),
        ("tests.envs.flaky:make_counting", '{"turnz": 1}', "unexpected keyword argument 'turnz' (did you mean"),
    ],
)
def test_kwargs_that_do_not_fit_the_factory_exit_2_before_the_model_loads(tmp_path, capsys, env, kwargs, message):
    # the model directory does not exist: the kwargs are checked first
    assert main(["eval", "--env", env, "--env-kwargs", kwargs, "--model", str(tmp_path / "none"), *SMALL]) == 2
    assert message in _one_line(capsys.readouterr().err)


def test_a_learning_rate_decay_over_minutes_without_the_minutes_exits_2_before_the_model_loads(tmp_path, capsys):
    argv = ["train", "--env", "examples.guess_number:GuessNumberEnv", "--model", str(tmp_path / "none")]
    assert main([*argv, "--lr-decay", "minutes", *SMALL]) == 2
    assert "lr_decay='minutes' decays the learning rate over max_minutes, which is None" in capsys.readouterr().err


def test_fitting_kwargs_of_a_partial_and_a_callable_object_run(tiny_model_dir, capsys):
    for env in ("tests.envs.flaky:counting_two", "tests.envs.flaky:make_counting"):
        assert main(_eval(tiny_model_dir, env, "--env-kwargs", '{"turns": 1}', "--episodes", "1", "--json")) == 0
        assert '"mean_turns": 1.0' in capsys.readouterr().out


# --- exit 3: the env broke the protocol ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ("tests.envs.flaky:ResetReturnsNone", "ResetReturnsNone.reset(seed='eval-0') returned NoneType"),
        ("tests.envs.flaky:WrongTypes", "WrongTypes.alive after reset(seed='eval-0') is 'yes', expected a bool"),
    ],
)
def test_eval_reports_a_contract_error_in_one_line_and_exits_3(tiny_model_dir, capsys, env, message):
    assert main(_eval(tiny_model_dir, env, "--episodes", "1")) == 3
    line = _one_line(capsys.readouterr().err)
    assert line.startswith("trl-env: the env broke the Env protocol: ") and message in line
    assert f"run `trl-env check-env {env}`" in line


def test_train_reports_a_contract_error_in_one_line_and_exits_3(tiny_model_dir, tmp_path, capsys):
    assert main(_train(tiny_model_dir, "tests.envs.flaky:ResetReturnsNone", tmp_path)) == 3
    line = _one_line(capsys.readouterr().err)
    assert "ResetReturnsNone.reset(seed='train-" in line and "returned NoneType, expected a tuple (env, delta)" in line


# --- the installed command itself ---------------------------------------------------------------------------


def test_the_command_exits_with_each_code(tiny_model_dir):
    model = str(tiny_model_dir)  # exit 0 through the command: test_eval_cli
    failed = _cli(*_eval(model, "tests.envs.basic:FailsAtReset", "--episodes", "2"))
    assert failed.returncode == 1 and "every episode failed" in _one_line(failed.stderr)
    typo = _cli(*_eval(model, "examples.guess_number:GuessNumberEnv", "--env-kwargs", '{"hihg": 8}'))
    assert typo.returncode == 2 and "did you mean 'high'?" in _one_line(typo.stderr)
    usage = _cli("eval", "--env", "examples.guess_number:GuessNumberEnv")  # argparse: --model is required
    assert usage.returncode == 2 and "the following arguments are required: --model" in usage.stderr
    contract = _cli(*_eval(model, "tests.envs.flaky:ResetReturnsNone", "--episodes", "1"))
    assert contract.returncode == 3 and "returned NoneType" in _one_line(contract.stderr)
