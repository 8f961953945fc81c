"""``trl-env eval`` and the evaluation API, on a tiny random Qwen3 model (no hub access)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trl_env.cli import main
from trl_env.evaluation import EvalSummary, env_outcome, evaluate, load_factory, read_seeds

ROOT = Path(__file__).resolve().parents[1]


def _eval_args(model_dir: Path, *extra: str) -> list[str]:
    return ["eval", "--env", "examples.guess_number:GuessNumberEnv", "--model", str(model_dir),
            "--max-turns", "3", "--max-turn-tokens", "4", "--max-completion-tokens", "64", "--no-progress", *extra]


def test_eval_writes_jsonl_whose_lines_give_the_printed_summary(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "episodes.jsonl"
    args = _eval_args(tiny_model_dir, "--episodes", "6", "--seeds", "3,eval-1,11", "--batch-size", "4",
                      "--env-kwargs", '{"high": 12}', "--out", str(out), "--json")
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    lines = [json.loads(line) for line in out.read_text().splitlines()]

    assert [r["seed"] for r in lines] == ["3", "eval-1", "11", "3", "eval-1", "11"]
    assert [r["index"] for r in lines] == list(range(6))
    for record in lines:
        assert 1 <= record["num_turns"] == len(record["turns"]) == record["answers"] <= 3
        assert record["num_turns"] == 3 or record["success"]
        assert record["turns"][0]["observation"]
        assert record["completion_tokens"] >= record["model_tokens"] > 0
        assert record["prompt_tokens"] > 0 and record["text"].count("<|im_start|>user") == record["num_turns"]
        assert record["turns"] and set(record["turns"][0]) >= {"completion", "action", "observation", "parsed_ok"}
        assert record["success"] == (record["reward"] >= 1.0)  # GuessNumberEnv: solved <=> reward >= 1
    n, turns = len(lines), sum(r["num_turns"] for r in lines)
    assert summary["episodes"] == n
    assert summary["success_rate"] == pytest.approx(sum(r["success"] for r in lines) / n)
    assert summary["mean_reward"] == pytest.approx(sum(r["reward"] for r in lines) / n)
    assert summary["mean_turns"] == pytest.approx(turns / n)
    assert summary["parse_failure_rate"] == pytest.approx(sum(r["parse_failures"] for r in lines) / turns)
    answers = sum(r["answers"] for r in lines)
    assert summary["valid_answer_rate"] == pytest.approx(sum(r["valid_guesses"] for r in lines) / answers)
    assert summary["consistency_rate"] == pytest.approx(sum(r["consistent_guesses"] for r in lines) / answers)
    assert EvalSummary.from_records(lines).metrics() == pytest.approx({**summary, "seconds": 0.0})


def test_eval_command_imports_the_env_from_the_working_directory(tiny_model_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "trl_env.cli", *_eval_args(tiny_model_dir, "--episodes", "2")]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "success rate" in result.stdout and "valid-answer rate" in result.stdout


class _Fresh:
    """Returns a new object from every call, and is solved by any answer containing a digit."""

    def __init__(self, solved: bool = False, steps: int = 0) -> None:
        self.solved, self.steps, self.alive = solved, steps, True
        self.reward = 0.0

    def reset(self, seed: str) -> tuple[_Fresh, str]:
        return _Fresh(), f"Say a number ({seed})."

    def step(self, action: str) -> tuple[_Fresh, str]:
        nxt = _Fresh(any(c.isdigit() for c in action), self.steps + 1)
        nxt.alive = not nxt.solved and nxt.steps < 2
        nxt.reward = 0.25  # below 1.0: success must come from `solved`, not the reward
        return nxt, "ok"


def test_evaluate_reads_success_from_the_env_object_the_episode_ended_with(tiny_qwen3, qwen3_tokenizer):
    summary = evaluate(_Fresh, tiny_qwen3, qwen3_tokenizer, ["a", "b", "c"], batch_size=2, progress=False,
                       max_turns=2, max_turn_tokens=3, max_completion_tokens=32)
    assert summary.episodes == 3 and [r["seed"] for r in summary.records] == ["a", "b", "c"]
    for record in summary.records:
        digits = any(c.isdigit() for turn in record["turns"] for c in turn["action"])
        assert record["success"] == digits
    assert math.isnan(summary.valid_answer_rate)  # no guess counters on this env


def test_env_outcome_falls_back_to_reward_without_solved():
    assert env_outcome(object(), 1.0) == {"success": True}
    assert env_outcome(object(), 0.99) == {"success": False}


def test_read_seeds_and_load_factory(tmp_path):
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("x\n\ny\n")
    assert read_seeds(seeds_file=seeds_file) == ["x", "y"]
    assert read_seeds(seeds_file=seeds_file, episodes=3) == ["x", "y", "x"]
    assert read_seeds("a,b,c", episodes=2) == ["a", "b"]
    assert read_seeds(episodes=2, default_prefix="train-") == ["train-0", "train-1"]
    with pytest.raises(ValueError):
        read_seeds("a", seeds_file)
    env = load_factory("examples.guess_number:GuessNumberEnv", {"high": 8})()
    assert env.high == 8
    with pytest.raises(ValueError, match="MODULE:FACTORY"):
        load_factory("examples.guess_number")
