"""What ``trl-env`` prints besides its results: the help text, and no noise from TRL or vLLM while training."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import trl_env
from trl_env.cli import SUBCOMMANDS, main

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["check", "check-env", "eval", "train", "view"]


def _help(capsys, *command: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_the_help_speaks_to_users_and_lists_the_exit_codes(capsys):
    text = _help(capsys)
    assert "Evaluate, train (GRPO with TRL) and check LLM agents" in text
    assert "exit codes:" in text and "3  the env broke the Env protocol" in text
    assert "``" not in text and "subcommand lives in its own module" not in text
    assert [m.__name__.rsplit(".", 1)[1].replace("_", "-") for m in SUBCOMMANDS] == COMMANDS


@pytest.mark.parametrize("command", COMMANDS)
def test_no_flag_shows_an_empty_default_or_rst(capsys, command):
    raw = _help(capsys, command)
    assert raw.split("\n\n")[1].strip().endswith("."), "no description under the usage line"
    text = " ".join(raw.split())  # argparse wraps lines: "(default" and ")" may be apart
    assert "(default )" not in text and "(default None)" not in text and "``" not in text


def test_train_help_shows_the_completion_budget_it_uses(capsys):
    text = " ".join(_help(capsys, "train").split())
    assert "no episode budget (default 1024)" in text  # train's own default, not the config's None
    eval_text = " ".join(_help(capsys, "eval").split())
    assert "system prompt of every episode (empty: none) (default empty)" in eval_text
    assert "no episode budget (default none)" in eval_text


def test_training_with_a_failed_episode_prints_no_transcript_and_no_triton_warning(tiny_model_dir, tmp_path):
    # SometimesBroken: every other env raises at its second step, so one of the two episodes fails
    command = [
        sys.executable, "-m", "trl_env.cli", "train", "--env", "tests.envs.basic:SometimesBroken",
        "--model", str(tiny_model_dir), "--steps", "1", "--num-generations", "2", "--prompts-per-step", "1",
        "--max-turns", "3", "--max-turn-tokens", "4", "--max-completion-tokens", "64", "--env-isolation", "thread",
        "--output-dir", str(tmp_path),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(trl_env.__file__).parents[1]), str(ROOT)])
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [line for line in result.stderr.splitlines() if not line.startswith(("Loading weights", "Writing model"))]
    assert any("All reward functions returned None for a sample: its env failed" in line for line in lines), lines
    assert all(len(line) < 300 for line in lines), max(lines, key=len)[:600]
    assert "<|im_start|>" not in result.stderr  # no transcript
    assert "Triton" not in result.stderr
