"""Training transcripts through ``report_to``: a real GRPOTrainer logging to a real wandb run, offline."""

from __future__ import annotations

import copy
import json

import pytest
from grpo_helpers import make_trainer

from tests.envs.basic import BAD_SEEDS, RaisesAtStep2
from trl_env import make_rollout_func
from trl_env.trainer.transcript_tables import COLUMNS, TABLE_NAME
from trl_env.trainer.transcripts import read_records


def test_recorded_episodes_land_in_the_wandb_run_as_a_table(qwen3_tokenizer, tiny_qwen3, tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")  # the dev extra installs it; trl-env itself never needs it
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_PROJECT", "trl-env-test")
    rollout_func = make_rollout_func(
        RaisesAtStep2, max_turns=3, max_turn_tokens=3, transcripts_every=1, transcripts_per_step=8
    )
    # one good and one failing seed per step (two groups of 4): the table shows an error for the failing one
    prompts = ["a", BAD_SEEDS[0], "c", BAD_SEEDS[1]]
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3),
        qwen3_tokenizer,
        rollout_func,
        tmp_path / "out",
        prompts=prompts,
        report_to=["wandb"],
        per_device_train_batch_size=8,
        shuffle_dataset=False,
    )
    try:
        trainer.train()
    finally:
        wandb.finish()
    tables = sorted(tmp_path.glob(f"wandb/offline-run-*/files/media/table/{TABLE_NAME}_*.table.json"))
    assert len(tables) == 2, sorted(str(p) for p in tmp_path.rglob("*.json"))
    rows = []
    for path in tables:
        table = json.loads(path.read_text())
        assert table["columns"] == COLUMNS
        rows += [dict(zip(COLUMNS, row, strict=True)) for row in table["data"]]
    assert sorted({(row["step"], row["seed"]) for row in rows}) == [(0, "a"), (0, "b"), (1, "c"), (1, "d")]
    assert len(rows) == 16 and {row["process"] for row in rows} == {0}
    for row in rows:
        failed = row["seed"] in BAD_SEEDS
        assert row["stop_reason"] == ("env_error" if failed else "done")
        assert ("ConnectionError: backend went away" in row["error"]) == failed
        assert row["turns"] == (2 if failed else 3) and row["text"].count("<|im_start|>assistant") == row["turns"]
    # the table holds exactly what the transcript file holds
    records = read_records(tmp_path / "out" / "transcripts.jsonl")
    assert sorted((r["step"], r["seed"], r["reward"], r["stop_reason"]) for r in records) == sorted(
        (row["step"], row["seed"], row["reward"], row["stop_reason"]) for row in rows
    )
