"""``trl-env eval`` and the evaluation API, on a tiny random Qwen3 model (no hub access)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from examples.guess_number import GuessNumberEnv
from trl_env.cli import main
from trl_env.cli.arguments import UsageError, read_seeds
from trl_env.cli.env_factory import load_factory
from trl_env.evaluation import EvalSummary, evaluate

ROOT = Path(__file__).resolve().parents[1]


def _eval_args(model_dir: Path, *extra: str) -> list[str]:
    return [
        "eval",
        "--env",
        "examples.guess_number:GuessNumberEnv",
        "--model",
        str(model_dir),
        "--max-turns",
        "3",
        "--max-turn-tokens",
        "4",
        "--max-completion-tokens",
        "64",
        "--no-progress",
        *extra,
    ]


def test_eval_writes_jsonl_whose_lines_give_the_printed_summary(tiny_model_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "episodes.jsonl"
    args = _eval_args(
        tiny_model_dir,
        "--episodes",
        "6",
        "--seeds",
        "3,eval-1,11",
        "--batch-size",
        "4",
        "--env-kwargs",
        '{"high": 12}',
        "--out",
        str(out),
        "--json",
    )
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    lines = [json.loads(line) for line in out.read_text().splitlines()]

    assert [r["seed"] for r in lines] == ["3", "eval-1", "11", "3", "eval-1", "11"]
    assert [r["index"] for r in lines] == list(range(6))
    for record in lines:
        metrics = record["metrics"]
        assert 1 <= record["num_turns"] == len(record["turns"]) == metrics["answers"] <= 3
        assert record["num_turns"] == 3 or metrics["success"] == 1.0
        assert record["turns"][0]["observation"]
        assert record["completion_tokens"] >= record["model_tokens"] > 0
        assert record["prompt_tokens"] > 0 and record["text"].count("<|im_start|>user") == record["num_turns"]
        assert record["turns"] and set(record["turns"][0]) >= {"completion", "action", "observation", "parsed_ok"}
        assert metrics["success"] == (record["reward"] >= 1.0)  # GuessNumberEnv: solved <=> reward >= 1
        assert sum(t["reward"] for t in record["turns"]) == pytest.approx(record["reward"])  # turn rewards add up
    n, turns = len(lines), sum(r["num_turns"] for r in lines)
    assert summary["episodes"] == n
    assert summary["success_rate"] == pytest.approx(sum(r["metrics"]["success"] for r in lines) / n)
    assert summary["mean_reward"] == pytest.approx(sum(r["reward"] for r in lines) / n)
    assert summary["mean_turns"] == pytest.approx(turns / n)
    assert summary["parse_failure_rate"] == pytest.approx(sum(r["parse_failures"] for r in lines) / turns)
    sums = summary["metric_sums"]
    assert sums["answers"] == sum(r["metrics"]["answers"] for r in lines) == turns
    assert sums["valid_guesses"] == pytest.approx(sum(r["metrics"]["valid_guesses"] for r in lines))
    assert EvalSummary.from_records(lines).metrics() == {**summary, "seconds": 0.0}  # same sums, same order


def test_eval_command_imports_the_env_from_the_working_directory(tiny_model_dir, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}
    command = [sys.executable, "-m", "trl_env.cli", *_eval_args(tiny_model_dir, "--episodes", "2")]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "success rate" in result.stdout and "mean valid_guesses" in result.stdout


class _Fresh:
    """Returns a new object from every call, and is solved by any answer containing a digit."""

    def metrics(self) -> dict[str, float]:
        return {"success": float(self.solved)}

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


def test_evaluate_reads_metrics_from_the_env_object_the_episode_ended_with(tiny_qwen3, qwen3_tokenizer):
    summary = evaluate(
        _Fresh,
        tiny_qwen3,
        qwen3_tokenizer,
        ["a", "b", "c"],
        batch_size=2,
        progress=False,
        max_turns=2,
        max_turn_tokens=3,
        max_completion_tokens=32,
    )
    assert summary.episodes == 3 and [r["seed"] for r in summary.records] == ["a", "b", "c"]
    for record in summary.records:
        digits = any(c.isdigit() for turn in record["turns"] for c in turn["action"])
        assert record["metrics"] == {"success": float(digits)}
    assert set(summary.metric_means) == {"success"}


def test_top_k_1_decodes_greedily_whatever_the_sampling_seed(tiny_qwen3, qwen3_tokenizer):
    def play(seed: int) -> list[dict]:
        torch.manual_seed(seed)
        settings = {"max_turns": 2, "max_turn_tokens": 3, "max_completion_tokens": 32}
        return evaluate(GuessNumberEnv, tiny_qwen3, qwen3_tokenizer, ["a", "b"], top_k=1, progress=False, **settings)

    first, second = play(0).records, play(1).records
    assert [r["completion_ids"] for r in first] == [r["completion_ids"] for r in second]
    for record in first:  # each sampled token (mask 1) is the model's most likely next token there
        ids = record["prompt_ids"] + record["completion_ids"]
        with torch.no_grad():
            most_likely = tiny_qwen3(torch.tensor([ids])).logits[0].argmax(-1).tolist()
        start = len(record["prompt_ids"])
        sampled = [i for i, mask in enumerate(record["env_mask"]) if mask == 1]
        assert sampled and all(record["completion_ids"][i] == most_likely[start + i - 1] for i in sampled)


def test_an_env_without_metrics_has_no_success_rate(tiny_qwen3, qwen3_tokenizer):
    class NoMetrics:
        reward, alive = 0.0, True

        def reset(self, seed):
            return self, "go"

        def step(self, action):
            self.alive = False
            return self, "done"

    summary = evaluate(NoMetrics, tiny_qwen3, qwen3_tokenizer, ["a"], progress=False, max_turns=1, max_turn_tokens=2)
    assert math.isnan(summary.success_rate) and summary.metric_means == {}
    assert "n/a (the env reports no success metric)" in summary.format()


def test_read_seeds_and_load_factory(tmp_path):
    seeds_file = tmp_path / "seeds.txt"
    seeds_file.write_text("x\n\ny\n")
    assert read_seeds(seeds_file=seeds_file) == ["x", "y"]
    assert read_seeds(seeds_file=seeds_file, episodes=3) == ["x", "y", "x"]
    assert read_seeds("a,b,c", episodes=2) == ["a", "b"]
    assert read_seeds(episodes=2, default_prefix="train-") == ["train-0", "train-1"]
    with pytest.raises(UsageError):
        read_seeds("a", seeds_file)
    env = load_factory("examples.guess_number:GuessNumberEnv", '{"high": 8}')()
    assert env.high == 8
    with pytest.raises(UsageError, match="MODULE:FACTORY"):
        load_factory("examples.guess_number")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--env", "examples.guess_number"], "MODULE:FACTORY"),
        (["--env", "examples.nope:Env"], "cannot import the env factory 'examples.nope:Env'"),
        (["--env", "examples.guess_number:GuessNumberEnv", "--env-kwargs", "{high: 8}"], "not valid JSON"),
        (["--env", "examples.guess_number:GuessNumberEnv", "--env-kwargs", "[8]"], "must be a JSON object"),
        (["--env", "examples.guess_number:GuessNumberEnv", "--max-turns", "0"], "max_turns must be >= 1"),
        (["--env", "examples.guess_number:GuessNumberEnv", "--top-k", "0"], "--top-k must be at least 1"),
    ],
)
def test_cli_mistakes_are_one_line_and_exit_2(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(ROOT)
    assert main(["eval", "--model", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err


def test_a_missing_model_directory_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    args = ["eval", "--env", "examples.guess_number:GuessNumberEnv", "--model", str(tmp_path / "missing")]
    assert main(args) == 2
    assert "does not exist" in capsys.readouterr().err
