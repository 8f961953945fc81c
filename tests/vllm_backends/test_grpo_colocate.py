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


def test_grpo_two_steps_with_colocated_vllm(peaked_model_dir, tmp_path):
    out = tmp_path / "summary.json"
    command = [
        sys.executable,
        str(HERE / "scripts" / "grpo_colocate.py"),
        "--model-dir",
        str(peaked_model_dir),
        "--out",
        str(out),
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=480, env={**os.environ, **VLLM_ENV})
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"GRPO colocate run timed out:\n{(error.stdout or '')[-2000:]}")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    summary = json.loads(out.read_text())
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
