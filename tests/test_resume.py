"""A GRPO run killed mid-training resumes from its last checkpoint and keeps producing valid rollouts."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).parent / "resume_run.py"


def test_killed_run_resumes_from_checkpoint(tmp_path, qwen3_tokenizer):
    env = dict(os.environ, TRL_EXPERIMENTAL_SILENCE="1", HF_HUB_OFFLINE="1")
    first = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(tmp_path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    try:
        while not (tmp_path / "checkpoint-2" / "trainer_state.json").exists():
            assert first.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no checkpoint-2 within the time limit"
            time.sleep(0.2)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    assert not (tmp_path / "log.json").exists()
    resumed_from = max(
        int(p.name.split("-")[1]) for p in tmp_path.glob("checkpoint-*") if (p / "trainer_state.json").exists()
    )
    assert resumed_from < 6

    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path), "--resume"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    log = json.loads((tmp_path / "log.json").read_text())
    steps = [entry for entry in log if "env/turns_mean" in entry]
    assert steps[-1]["step"] == 6
    after_resume = [entry for entry in steps if entry["step"] > resumed_from]
    assert after_resume, "no rollouts after resuming"
    for entry in after_resume:
        assert entry["env/turns_mean"] == 3 and entry["env/errors"] == 0
        assert entry["completions/clipped_ratio"] == 0
