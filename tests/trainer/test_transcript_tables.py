"""Training transcripts through ``report_to``: a real GRPOTrainer logging to a real wandb run, offline.

trackio takes the same call; its test runs where trackio is installed (not by ``make test``: installing
trackio 0.43 moves pillow 13 back to 12.3).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys

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


TRACKIO_PROBE = """
import json, sys
from types import SimpleNamespace
import trackio
from trl_env import Episode
from trl_env.episode import StopReason
from trl_env.trainer.transcript_tables import TranscriptTables
trackio.init(project="trl-env-test", name="run")
tables = TranscriptTables()
failed = Episode(seed="b", prompt_ids=[1], prompt_text="P", stop_reason=StopReason.ENV_ERROR, error="boom")
tables.add(5, [Episode(seed="a", prompt_ids=[1], prompt_text="P", reward=2.0), failed])
tables.on_log(SimpleNamespace(report_to=["trackio"]), SimpleNamespace(is_world_process_zero=True), None)
trackio.finish()
"""


def test_trackio_gets_the_same_table(tmp_path):
    if importlib.util.find_spec("trackio") is None:
        pytest.skip("trackio is not installed")
    # trackio reads TRACKIO_DIR once, at import (and TRL imports it early): a process of its own
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path), "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", TRACKIO_PROBE], env=env, check=True, timeout=120, capture_output=True)
    database = sqlite3.connect(tmp_path / "trl-env-test.db")
    (logged,) = [
        m for (raw,) in database.execute("select metrics from metrics") if TABLE_NAME in (m := json.loads(raw))
    ]
    rows = logged[TABLE_NAME]["_value"]
    assert [(r["step"], r["seed"], r["reward"], r["stop_reason"], r["error"]) for r in rows] == [
        (5, "a", 2.0, "running", ""),
        (5, "b", 0.0, "env_error", "boom"),
    ]
