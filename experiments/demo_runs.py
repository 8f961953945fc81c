"""Run the demo (``demo/run_demo.py``) as one arm of a comparison, and tabulate the arms' held-out results.

The learning experiments compare settings of the same demo run: each run is its own process with a fixed number
of optimizer steps and one training seed, evaluated on held-out episodes after training. A run whose
``summary.json`` exists is not run again, so an interrupted comparison resumes.

Example:
    >>> table({"a": [0.5, 0.7]})["a"]["mean"], table({"a": [0.5, 0.7]})["a"]["sd"] > 0
    (0.6, True)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_demo(out: Path, seed: int, steps: int, flags: list[str], eval_episodes: int, threads: int | None) -> None:
    """Train and evaluate one demo run into ``out`` unless its ``summary.json`` is there.

    Args:
        out: the run's folder.
        seed: the training seed.
        steps: optimizer steps (the wall-time budget is lifted: runs are bounded by steps, not minutes).
        flags: the arm's demo flags, e.g. ``["--history", "window"]``.
        eval_episodes: held-out episodes evaluated after training.
        threads: torch threads (None: the demo's default, the idle cores).
    """
    if (out / "summary.json").exists():
        return
    command = [
        sys.executable,
        str(ROOT / "demo" / "run_demo.py"),
        *("--seed", str(seed), "--max-steps", str(steps), "--minutes", "600"),
        *("--eval-episodes", str(eval_episodes), "--out-dir", str(out)),
        *(["--threads", str(threads)] if threads else []),
        *flags,
    ]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)


def summaries(folder: Path, prefix: str) -> list[dict]:
    """The ``summary.json`` of every run ``folder/<prefix>-seed<N>``, by seed."""
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"{prefix}-seed*/summary.json"))]


def table(rows: dict[str, list[float]]) -> dict[str, dict]:
    """Seeds, mean, sample sd and the runs of each arm's figures."""
    return {
        name: {
            "seeds": len(v),
            "mean": statistics.mean(v),
            "sd": statistics.stdev(v) if len(v) > 1 else None,
            "runs": v,
        }
        for name, v in rows.items()
        if v
    }
