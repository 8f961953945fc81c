"""``env/*`` metrics and the failure check under two real training processes (gloo on the CPU).

Each test launches ``two_process_train.py`` (a real ``GRPOTrainer`` with ``make_rollout_func``, two steps)
with a real launcher. The env behaves differently per rank (``rank_envs.RankedEnv``): rank 0's episodes
last one turn, rank 1's three, and on rank 1 only the envs of seeds 2, 6 and 7 raise, so that in step 2
every episode of rank 1 fails while rank 0's all succeed. Each process records its own episodes, so the
logged figures are checked against both processes' records.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCRIPT = HERE / "two_process_train.py"
CONFIG = ROOT / "configs" / "accelerate_cpu_2proc.yaml"
TIMEOUT = 300  # seconds; a hang (a process left waiting in a collective) fails the test instead of blocking it


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def launch(launcher: str, model_dir: Path, out: Path, *args: str, **env: str) -> tuple[int, list[dict], str]:
    """Run the two-process script; returns the launcher's exit code, each rank's summary, and the log."""
    port = str(free_port())
    commands = {
        "torchrun": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", port],
        "accelerate": [
            *(sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIG)),
            *("--main_process_port", port),
        ],
    }
    command = [*commands[launcher], str(SCRIPT), "--model-dir", str(model_dir), "--out", str(out), *args]
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    paths = os.pathsep.join([str(ROOT / "src"), str(ROOT), clean.get("PYTHONPATH", "")])
    environment = {**clean, "PYTHONPATH": paths, "HF_HUB_OFFLINE": "1", "TRL_EXPERIMENTAL_SILENCE": "1", **env}
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "log.txt", "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
        try:
            code = process.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"{launcher}: the processes did not finish in {TIMEOUT} s (a rank hung?)\n" + tail(out))
    summaries = [json.loads(path.read_text()) for path in sorted(out.glob("rank*.json"))]
    return code, summaries, tail(out)


def tail(out: Path) -> str:
    return "\n".join((out / "log.txt").read_text(errors="replace").splitlines()[-40:])


def env_logs(summary: dict) -> list[dict[str, float]]:
    """The ``env/*`` figures of each logged training step."""
    return [{k: v for k, v in entry.items() if k.startswith("env/")} for entry in summary["logs"] if "loss" in entry]


def expected_from_records(summaries: list[dict], step: int) -> dict[str, float]:
    """The env figures of one step over both processes' own records of their episodes."""
    turns = [t for s in summaries for t in s["rollouts"][step]["num_turns"]]
    failed = [f for s in summaries for f in s["rollouts"][step]["failed"]]
    rewards = [r for s in summaries for r in s["rollouts"][step]["env_reward"] if r is not None]
    return {
        "env/turns_mean": sum(turns) / len(turns),
        "env/errors": float(sum(failed)),
        "env/reward_mean": sum(rewards) / len(rewards),
    }


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_env_metrics_count_the_episodes_of_both_processes(launcher, tiny_model_dir, tmp_path):
    code, summaries, log = launch(launcher, tiny_model_dir, tmp_path / launcher)
    assert code == 0, log
    assert [s["rank"] for s in summaries] == [0, 1] and len({s["pid"] for s in summaries}) == 2, log
    assert all(s["num_processes"] == 2 and "error" not in s and s["global_step"] == 2 for s in summaries), log
    rank0, rank1 = summaries
    # what each process played: rank 0 one turn and no failure; rank 1 three turns, or a failure at turn 2,
    # half of its episodes failing in step 1 and all of them in step 2 (the run goes on: rank 0's succeed)
    assert all(t == 1 for r in rank0["rollouts"] for t in r["num_turns"])
    assert not any(f for r in rank0["rollouts"] for f in r["failed"])
    assert [sum(r["failed"]) for r in rank1["rollouts"]] == [4, 8]
    assert all(
        t == (2 if f else 3) for r in rank1["rollouts"] for t, f in zip(r["num_turns"], r["failed"], strict=True)
    )
    logged0, logged1 = env_logs(rank0), env_logs(rank1)
    assert logged0 == logged1, "every process logs the same figures"
    for step in range(2):
        expected = expected_from_records(summaries, step)
        assert {k: logged0[step][k] for k in expected} == pytest.approx(expected)
    # the same, spelled out: (8 x 1 + 4 x 3 + 4 x 2) / 16 turns, not rank 0's own 1.0
    assert logged0[0]["env/turns_mean"] == pytest.approx(1.75)
    assert logged0[0]["env/errors"] == 4.0 and logged0[1]["env/errors"] == 8.0
    assert logged0[0]["env/reward_mean"] == pytest.approx((8 * 1.0 + 4 * 2.0) / 12)
    # the transcript table (where wandb is installed) holds one recorded episode of each process per step
    tables = sorted((tmp_path / launcher).glob("wandb/offline-run-*/files/media/table/env/transcripts_*.table.json"))
    if importlib.util.find_spec("wandb") is not None:
        rows = [(row[0], row[1], row[6]) for path in tables for row in json.loads(path.read_text())["data"]]
        assert sorted(rows) == [(0, 0, 1), (0, 1, 2), (1, 0, 1), (1, 1, 2)], rows  # (step, process, turns)


def test_every_process_stops_at_the_same_step_when_every_env_fails(tiny_model_dir, tmp_path):
    code, summaries, log = launch("torchrun", tiny_model_dir, tmp_path, TRL_ENV_TEST_FAIL_ALL="1")
    assert code != 0
    assert [s["rank"] for s in summaries] == [0, 1], log
    for summary in summaries:
        assert summary["error"].startswith("EnvFailuresError: every episode of this step failed (16 of 16)"), log
        assert "cannot start" in summary["error"] and summary["global_step"] == 0


def test_each_process_runs_its_own_pipeline_and_they_stay_matched(tiny_model_dir, tmp_path):
    """Pipelined rollouts (max_staleness=1) under two processes: each plays its share one step ahead, and the
    collectives of the metrics, the failure check and the importance-sampling correction stay matched."""
    code, summaries, log = launch("torchrun", tiny_model_dir, tmp_path, "--steps", "3", "--max-staleness", "1")
    assert code == 0, log
    assert all("error" not in s and s["global_step"] == 3 for s in summaries), log
    for summary in summaries:
        versions = [set(r["policy_version"]) for r in summary["rollouts"]]
        assert versions == [{0}, {0}, {1}], versions  # one step ahead once running
    rank0, rank1 = summaries
    assert [r["seeds"] for r in rank0["rollouts"]] != [r["seeds"] for r in rank1["rollouts"]]  # each its own share
    assert env_logs(rank0) == env_logs(rank1), "every process logs the same figures"
    staleness = [e["pipeline/staleness"] for e in rank0["logs"] if "pipeline/staleness" in e]
    assert staleness == [0.0, 1.0, 1.0]
