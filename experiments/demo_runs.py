"""Run the demo (``demo/run_demo.py``) as one arm of a comparison, and tabulate the arms' held-out results.

The learning experiments compare settings of the same demo run: each run is its own process with a fixed number
of optimizer steps and one training seed, evaluated on held-out episodes after training. A run whose
``summary.json`` exists is not run again, so an interrupted comparison resumes.

Example:
    >>> table({"a": [0.5, 0.7]})["a"]["mean"], table({"a": [0.5, 0.7]})["a"]["sd"] > 0
    (0.6, True)
    >>> run_folder(Path("runs"), "staleness 1, no IS correction", seed=2, steps=10).as_posix()
    'runs/steps10/staleness_1_no_IS_correction-seed2'
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what the comparisons measured, whatever the demo's default becomes: no KL penalty unless an arm sets one (an
# arm's own flags come later on the command line, so they win)
MEASURED_RECIPE = ["--beta", "0"]


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
        *MEASURED_RECIPE,
        *flags,
    ]
    print(" ".join(command), flush=True)
    subprocess.run(command, check=True)


def _arm(name: str) -> str:
    return name.replace(" ", "_").replace(",", "")


def run_folder(runs: Path, name: str, seed: int, steps: int) -> Path:
    """The folder of one run of the arm ``name``: ``runs/steps<N>/<name>-seed<S>``."""
    return runs / f"steps{steps}" / f"{_arm(name)}-seed{seed}"


def summaries(runs: Path, name: str, steps: int) -> list[dict]:
    """The ``summary.json`` of every run of the arm ``name`` at ``steps`` steps, by seed."""
    return [
        json.loads(p.read_text()) for p in sorted((runs / f"steps{steps}").glob(f"{_arm(name)}-seed*/summary.json"))
    ]


def write_result(result: Path, steps: int, shown: dict) -> Path:
    """Write ``shown`` as JSON next to ``result``, its name suffixed ``_steps<N>``; the path written."""
    path = result.with_name(f"{result.stem}_steps{steps}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(shown, indent=1))
    return path


def comparison_parser(
    description: str, steps: int, only: str
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The ``run``/``report`` command line of a comparison; the parser and its ``run`` part (to add flags to).

    Args:
        description: the experiment, in a line.
        steps: the default optimizer steps per run.
        only: ``--only``'s help, naming an arm.
    """
    parser = argparse.ArgumentParser(description=description)
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run")
    go.add_argument("--seeds", nargs="+", type=int, default=[0])
    go.add_argument("--steps", type=int, default=steps)
    go.add_argument("--eval-episodes", type=int, default=64)
    go.add_argument("--threads", type=int, help="torch threads per run (default: the idle cores; 1 lets two share 2)")
    go.add_argument("--only", help=only)
    sub.add_parser("report").add_argument("--steps", type=int, default=steps)
    return parser, go


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
