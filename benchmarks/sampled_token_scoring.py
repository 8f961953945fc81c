"""Training-step time of the demo with the LM head scoring only the sampled tokens, against every position.

Runs the demo as a user does (``python demo/run_demo.py``: SmolLM2-135M-Instruct, LoRA, the demo's recipe, KL
penalty included), for a fixed number of optimizer steps, once scoring only the sampled tokens (the default) and
once with ``--score-every-position`` (what TRL 1.16 does on CPU), the two interleaved, each ``--repeats`` times.
The same training seed plays the same secrets, so both sides train on the same task; the figure is the training
seconds per step (the demo's ``train_seconds``, model loading and evaluation left out).

Run: python benchmarks/sampled_token_scoring.py [--task guess] [--steps 4] [--repeats 1] [--threads 2]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import ROOT, Row, cli, log, median  # noqa: E402

SIDES = {"sampled tokens only (default)": [], "every position (TRL 1.16 on CPU)": ["--score-every-position"]}


def demo_seconds_per_step(task: str, steps: int, threads: int, flags: list[str]) -> tuple[float, dict]:
    """Train the demo for ``steps`` steps; its training seconds per step and its summary."""
    with tempfile.TemporaryDirectory() as out:
        command = [
            sys.executable, str(ROOT / "demo" / "run_demo.py"), "--task", task, "--max-steps", str(steps),
            "--skip-before", "--eval-episodes", "8", "--threads", str(threads), "--out-dir", out, *flags,
        ]  # fmt: skip
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
        summary = json.loads((Path(out) / "summary.json").read_text())
    return summary["train_seconds"] / summary["steps"], summary


def measure(args) -> list[Row]:
    seconds: dict[str, list[float]] = {name: [] for name in SIDES}
    for round_ in range(args.repeats):
        for name in list(SIDES)[:: 1 if round_ % 2 == 0 else -1]:
            per_step, summary = demo_seconds_per_step(args.task, args.steps, args.threads, SIDES[name])
            log(f"{name}: {per_step:.1f} s per step ({summary['steps']} steps, bf16 {summary['bf16']})")
            seconds[name].append(per_step)
    sampled, every = (median(seconds[name]) for name in SIDES)
    note = (
        f"demo --task {args.task}, {args.steps} steps x {args.repeats} runs per side, {args.threads} threads; "
        f"seconds per step, per run: {seconds}"
    )
    return [
        Row("sampled-token scoring", "training seconds per step, every position", f"{every:.1f}"),
        Row("sampled-token scoring", "training seconds per step, sampled tokens only", f"{sampled:.1f}"),
        Row("sampled-token scoring", "speed-up", f"{every / sampled:.2f}x", notes=[note]),
    ]


def add_arguments(parser) -> None:
    parser.add_argument("--task", default="guess", help="the demo's --task (default guess)")
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per run (default 4)")
    parser.add_argument("--repeats", type=int, default=1, help="runs per side (default 1)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
