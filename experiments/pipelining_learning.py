"""Does pipelining hurt learning? The demo task, plain GRPO, ``max_staleness`` 0 vs 1 at equal steps.

Each run is ``demo/run_demo.py`` (guess-the-number, SmolLM2-135M-Instruct + LoRA) with a fixed number of optimizer
steps, one staleness and one training seed, evaluated on held-out episodes after training; ``--no-correction``
adds the ablation (``max_staleness`` 1 without the importance-sampling correction). Runs go one at a time, each in
its own process; a run whose ``summary.json`` exists is not run again. Two invocations with different ``--seeds``
and ``--threads 1`` share two cores (the results do not depend on speed: runs are bounded by steps, not minutes).

Usage (from the repository root)::

    python experiments/pipelining_learning.py run --seeds 0 1 2 --steps 10
    python experiments/pipelining_learning.py report --steps 10

or the two variants side by side, one thread each::

    python experiments/pipelining_learning.py run --seeds 0 1 2 --steps 10 --threads 1 --only "staleness 0" &
    python experiments/pipelining_learning.py run --seeds 0 1 2 --steps 10 --threads 1 --only "staleness 1"

Example:
    >>> [name for name, _ in variants(no_correction=True)]
    ['staleness 0', 'staleness 1', 'staleness 1, no IS correction']
"""

from __future__ import annotations

from demo_runs import ROOT, comparison_parser, run_demo, run_folder, summaries, table, write_result

RUNS = ROOT / "outputs" / "experiments" / "pipelining"
RESULT = ROOT / "experiments" / "out" / "pipelining_learning.json"  # _steps<N> is added to the name


def variants(no_correction: bool = False) -> list[tuple[str, list[str]]]:
    """The compared settings and their demo flags."""
    chosen = [("staleness 0", ["--max-staleness", "0"]), ("staleness 1", ["--max-staleness", "1"])]
    if no_correction:
        chosen.append(("staleness 1, no IS correction", ["--max-staleness", "1", "--no-is-correction"]))
    return chosen


def run(
    seeds: list[int],
    steps: int,
    eval_episodes: int,
    no_correction: bool,
    threads: int | None = None,
    only: str | None = None,
) -> None:
    for seed in seeds:
        for name, flags in variants(no_correction):
            if only is None or name == only:
                flags = ["--skip-before", "--advantage", "episode", *flags]
                run_demo(run_folder(RUNS, name, seed, steps), seed, steps, flags, eval_episodes, threads)


def report(steps: int) -> dict:
    rows = {
        name: [s["after"]["success_rate"] for s in summaries(RUNS, name, steps)]
        for name, _ in variants(no_correction=True)
    }
    shown = table(rows)
    write_result(RESULT, steps, shown)
    for name, row in shown.items():
        print(f"{name}: held-out success {row['mean']:.3f} over {row['seeds']} seed(s) {row['runs']}")
    return shown


def main() -> None:
    only = "one variant, e.g. 'staleness 1' (a second invocation runs the other)"
    parser, go = comparison_parser(__doc__.splitlines()[0], steps=20, only=only)
    go.add_argument("--no-correction", action="store_true", help="also the ablation without the IS correction")
    args = parser.parse_args()
    if args.command == "run":
        run(args.seeds, args.steps, args.eval_episodes, args.no_correction, args.threads, args.only)
    report(args.steps)


if __name__ == "__main__":
    main()
