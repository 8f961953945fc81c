"""``trl-env train`` with a per-turn history and a tree: the command builds TurnLevelGRPOTrainer and trains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trl_env.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _from_the_repository_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the env factory is importable from the current directory


def test_train_with_a_tree_under_history_template_trains_the_turn_samples(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    argv = [
        "train", "--env", "tests.history.envs:Talk", "--model", str(tiny_model_dir), "--steps", "1",
        "--num-generations", "2", "--prompts-per-step", "1", "--max-turns", "3", "--max-turn-tokens", "4",
        "--max-completion-tokens", "64", "--env-isolation", "thread", "--output-dir", str(out),
        "--history", "template", "--tree", "1x2", "--advantage", "tree",
    ]  # fmt: skip
    assert main(argv) == 0  # a plain GRPOTrainer would be refused: the command chose TurnLevelGRPOTrainer
    (step, _) = json.loads((out / "log_history.json").read_text())  # one step's figures, then the run's summary
    assert step["env/turns_mean"] == 3 and step["env/errors"] == 0 and step["loss"] == step["loss"]  # not NaN
    assert capsys.readouterr().out.rstrip().endswith(f"model saved to {out / 'final'}")
