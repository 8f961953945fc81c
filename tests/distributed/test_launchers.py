"""What a launcher really started: ``accelerate launch --cpu --num_processes 2`` is one process, and trl-env says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from trl_env.trainer.launch_check import launch_problem

ROOT = Path(__file__).resolve().parents[2]
PROBE = """
import os
from accelerate import PartialState
from trl_env.trainer.launch_check import launch_problem
state = PartialState(cpu=True)
# One file per process: two processes printing to one pipe can interleave their lines.
line = f"processes {state.num_processes} problem {launch_problem(os.environ, state.num_processes)}"
with open(os.path.join(os.environ["PROBE_OUT"], f"rank{state.process_index}.txt"), "w") as out:
    out.write(line)
"""


def run_probe(tmp_path: Path, *launcher: str) -> list[str]:
    probe = tmp_path / "probe.py"
    probe.write_text(PROBE)
    clean = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **clean,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), clean.get("PYTHONPATH", "")]),
        "PROBE_OUT": str(out),
    }
    result = subprocess.run(
        [sys.executable, "-m", *launcher, str(probe)], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return sorted(path.read_text() for path in out.glob("rank*.txt"))


def test_accelerate_cpu_flag_starts_one_process_and_trl_env_warns(tmp_path):
    lines = run_probe(tmp_path, "accelerate.commands.launch", "--cpu", "--num_processes", "2")
    assert len(lines) == 1 and lines[0].startswith("processes 1 problem accelerate launch --cpu"), lines


def test_the_committed_accelerate_config_starts_two_cpu_processes(tmp_path):
    config = str(ROOT / "configs" / "accelerate_cpu_2proc.yaml")
    lines = run_probe(tmp_path, "accelerate.commands.launch", "--config_file", config)
    assert lines == ["processes 2 problem None"] * 2, lines


def test_processes_that_each_train_alone_are_named():
    assert "WORLD_SIZE=2" in launch_problem({"WORLD_SIZE": "2", "MASTER_PORT": "1"}, num_processes=1)
    assert launch_problem({"ACCELERATE_USE_CPU": "true"}, num_processes=1) is None  # --cpu, one process asked
    assert launch_problem({"ACCELERATE_USE_CPU": "1", "MASTER_PORT": "1", "PMI_SIZE": "2"}, num_processes=1) is None
