"""trl-env check-env: passes the examples, reports each kind of violation, exits non-zero."""

import time

import pytest

from examples.guess_number import GuessNumberEnv
from tests.envs.flaky import HangsAtStep, NonDeterministic
from trl_env.checks.env import check_env
from trl_env.cli import main


@pytest.mark.parametrize("factory", ["examples.guess_number:GuessNumberEnv", "examples.wordle:WordleEnv"])
def test_example_envs_pass(factory, capsys):
    assert main(["check-env", factory]) == 0
    assert "checks passed" in capsys.readouterr().out


def test_violations_are_reported_per_check():
    report = check_env(NonDeterministic)
    failed = {r.name: r.detail for r in report.results if not r.ok}
    assert not report.ok
    assert any("deterministic" in name for name in failed)
    assert any("héllo" in name and "UnicodeEncodeError" in detail for name, detail in failed.items())
    assert any("episode ends" in name for name in failed)
    assert any(r.ok and "'42'" in r.name for r in report.results)  # the plain action itself is fine


def test_type_violations_name_the_class_and_field(capsys):
    assert main(["check-env", "tests.envs.flaky:WrongTypes"]) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "WrongTypes.alive after reset(seed='0') is 'yes', expected a bool" in out


def test_bad_factory_spec_is_a_clear_error(capsys):
    assert main(["check-env", "examples.guess_number"]) == 2
    assert "MODULE:FACTORY" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("factory", "check", "call"),
    [
        ("tests.envs.flaky:HangsAtReset", "reset returns (env, str) with valid reward/alive", "reset('0')"),
        ("tests.envs.flaky:HangsAtStep", "step('') returns valid (env, str)", "step('')"),
    ],
)
def test_a_hanging_env_is_reported_within_about_one_timeout(capsys, factory, check, call):
    start = time.perf_counter()
    assert main(["check-env", factory, "--timeout", "1"]) == 1
    elapsed = time.perf_counter() - start
    out = capsys.readouterr().out
    head, *rows = out.strip().splitlines()
    assert f"HANG in check {check!r}: {call} did not return within 1 s; stopped" in head
    assert f"HANG  {check}  -- {call} did not return within 1 s" in rows
    assert rows[-1].endswith("a reused env resets cleanly (warm reset = fresh reset)  -- not run (stopped at the hang)")
    assert elapsed < 3.0, f"{elapsed:.1f} s for a 1 s timeout"  # before: one deadline per check, 11-14 s


def test_check_env_takes_a_timeout_and_refuses_a_bad_one(capsys):
    report = check_env(HangsAtStep, timeout=0.5)
    assert not report.ok and report.hang and len(report.not_run) == 10
    assert check_env(GuessNumberEnv, timeout=0.5).ok  # a healthy env is unaffected by a short deadline
    with pytest.raises(ValueError, match="positive number of seconds"):
        check_env(GuessNumberEnv, timeout=0)
    assert main(["check-env", "examples.guess_number:GuessNumberEnv", "--timeout", "-1"]) == 2
    assert "--timeout must be a positive number of seconds" in capsys.readouterr().err
