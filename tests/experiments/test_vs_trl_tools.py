"""The side-by-side with TRL's tool loop: both arms train the calculator, are evaluated alike, and are reported."""

from __future__ import annotations

import doctest
import json

from tests.experiments.experiment_module import load_experiment


def _load():
    return load_experiment("vs_trl_tools")


def test_both_arms_train_a_step_then_are_evaluated_on_the_same_heldout_questions(tiny_model_dir, tmp_path):
    experiment = _load()
    runs = tmp_path / "runs"
    common = ["--runs", str(runs), "--model", str(tiny_model_dir), "--max-steps", "1", "--eval-episodes", "2"]
    common += ["--threads", "1", "--tokens", "24"]  # a random tiny model never stops a turn by itself
    # the smallest GRPO step (one question, two episodes): every position of every episode is scored over the
    # 151k-token vocabulary on CPU, so the default 2 x 8 episodes made each arm's step ~45 s
    common += ["--generations", "2", "--questions-per-step", "1"]
    for arm in ("untrained", "trl", "trl-env"):
        assert experiment.main(["one", "--arm", arm, *common]) == 0
    assert experiment.main(["report", "--runs", str(runs), "--result", str(tmp_path / "r.json")]) == 0
    table = json.loads((tmp_path / "r.json").read_text())
    assert sorted(table) == ["trl", "trl-env", "untrained"]
    assert table["trl"]["steps"] == table["trl-env"]["steps"] == [1] and table["untrained"]["steps"] == [0]
    _, heldout = experiment.questions(4096, 2)
    for arm, row in table.items():
        assert row["eval_episodes"] == [2] and 0.0 <= row["heldout_success"][0] <= 1.0
        records = [json.loads(line) for line in (runs / f"{arm}-seed0" / "transcripts_heldout.jsonl").open()]
        assert [r["seed"] for r in records] == heldout  # the same questions for every arm
        assert '"name": "multiply"' in records[0]["text"]  # the tools are declared in the prompt
    trl = json.loads((runs / "trl-seed0" / "summary.json").read_text())
    assert trl["steps_per_minute"] > 0 and trl["train_seconds"] > 0


def test_the_training_and_heldout_questions_never_meet():
    training, heldout = _load().questions(4096, 128)
    assert len(heldout) == len(set(heldout)) == 128 and len(training) == 4096
    assert not set(training) & set(heldout) and len(set(training)) == 576 - 128  # every other question is trained on


def test_the_docstring_examples_run():
    assert doctest.testmod(_load()).failed == 0
