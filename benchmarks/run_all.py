"""Run every benchmark and print each figure with its target and whether it is met.

Each benchmark runs in its own process (its own torch threads, its own memory peak) and
measures its ratios side by side within that process. The default sizes keep the whole run
under about ten minutes on two CPU cores; ``--full`` uses bigger sizes and more repeats.

Run: python benchmarks/run_all.py [--full] [--only 1 2 3 4 5] [--output benchmarks/out/results.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import OUT, Row, print_table  # noqa: E402

HERE = Path(__file__).resolve().parent

# number -> (script, quick flags, full flags)
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "1": ("batched_vs_sequential.py", [], ["--sizes", "8", "16", "32", "64", "--repeats", "3"]),
    "2": ("overhead.py", [], ["--repeats", "5", "--instant-repeats", "20"]),
    "3": ("turn_scaling.py", [], ["--repeats", "25", "--curve-episodes", "32"]),
    "4": ("vs_trl.py", [], ["--repeats", "8", "--batch", "8"]),
    "5": ("memory.py", [], ["--model-turn-tokens", "16", "--before-fix-turns", "16"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="bigger sizes and more repeats (tens of minutes)")
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks")
    parser.add_argument("--output", default=str(OUT / "results.md"), help="also write the table here")
    args = parser.parse_args()

    rows: list[Row] = []
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for number in args.only or sorted(BENCHMARKS):
            script, quick, full = BENCHMARKS[number]
            target = Path(scratch) / f"{number}.json"
            command = [sys.executable, str(HERE / script), *(full if args.full else quick), "--json", str(target)]
            print(f"[{number}] {' '.join(command[1:])}", file=sys.stderr, flush=True)
            start = time.perf_counter()
            done = subprocess.run(command, stdout=subprocess.DEVNULL)
            seconds[number] = time.perf_counter() - start
            if done.returncode != 0 or not target.exists():
                rows.append(Row(f"{number} {script}", "run", f"failed (exit {done.returncode})", "", False))
                continue
            rows += [Row(**row) for row in json.loads(target.read_text())]
    total = sum(seconds.values())
    timing = ", ".join(f"[{n}] {s:.0f} s" for n, s in seconds.items())
    text = print_table(rows, "trl-env benchmarks" + (" (--full)" if args.full else ""))
    missed = [row for row in rows if row.met is False]
    summary = (
        f"\n{sum(row.met is True for row in rows)} targets met, {len(missed)} missed; "
        f"wall time {total:.0f} s ({timing})"
    )
    print(summary)
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(text + "\n" + summary + "\n")


if __name__ == "__main__":
    main()
