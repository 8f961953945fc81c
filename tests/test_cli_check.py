"""trl-env check: exit codes and report for a passing, a refused and a failing tokenizer."""

import pkgutil
import re

import pytest

from trl_env.cli import main


@pytest.fixture(scope="module")
def saved(tmp_path_factory, template_tokenizers):
    def save(name):
        path = tmp_path_factory.mktemp(name)
        template_tokenizers(name).save_pretrained(path)
        return str(path)

    return save


def test_qwen3_passes(saved, capsys):
    assert main(["check", saved("qwen3")]) == 0
    out = capsys.readouterr().out
    assert "additive on all" in out and "tool turns: checked (several calls per turn" in out


def test_llama_tool_turns_are_checked_with_one_call_per_turn(saved, capsys):
    assert main(["check", saved("llama3_1")]) == 0
    assert "tool turns: checked (one call per turn" in capsys.readouterr().out


def test_qwen3_without_thinking_needs_a_preset(saved, capsys):
    path = saved("qwen3")
    assert main(["check", path, "--no-thinking"]) == 2
    err = capsys.readouterr().err
    assert "`--preset qwen3_nothink`" in err and "trl_env.chat.presets.preset('qwen3_nothink')" in err
    for name in re.findall(r"trl_env(?:\.\w+)+", err):  # every Python name the message gives exists
        assert pkgutil.resolve_name(name.rsplit(".", 1)[0] + ":" + name.rsplit(".", 1)[1]), name
    assert main(["check", path, "--preset", "qwen3_nothink"]) == 0


def test_smolvlm_fails_with_a_table(saved, capsys):
    assert main(["check", saved("smolvlm")]) == 1
    out = capsys.readouterr().out
    assert "NOT additive" in out and "prompt | model" in out
