"""trl-env check-env: passes the examples, reports each kind of violation, exits non-zero."""

import pytest

from tests.envs.flaky import NonDeterministic
from trl_env.cli import main
from trl_env.env_checker import check_env


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
