"""Long horizons: does ``history="window"`` let a policy learn a task whose episodes do not fit under ``"full"``?

The task is guess rounds (``demo/run_demo.py --task rounds``: 4 games of guess-the-number 1..8 in one episode, 4
guesses each, up to 16 model turns; :class:`examples.guess_rounds.GuessRoundsEnv`) at the demo's budget of 128
completion tokens. Under ``full`` the episode is one growing sequence, and the budget holds about one round and a
half: the episode ends there (``token_budget``). Under ``window`` (3 earlier turns) every turn is its own sample
with a bounded prompt, so every round is played. Both arms train plain GRPO (SmolLM2-135M-Instruct + LoRA, the
demo's recipe) for the same optimizer steps and are evaluated on the same held-out seeds, each under its own
history policy and budget (what a user of that setting gets); seed 0 also evaluates the untrained model. The
``window`` arm trains at most 32 turn samples per step (``--max-turn-samples``: each episode an equal share of
its turns, reweighted so the loss stays an unbiased estimate): all of a step's 150-200 in one forward pass did
not fit in 24 GiB.

Reported per arm: held-out share of rounds solved (``success``), the first round's success (the part a ``full``
episode can always play) and the rounds played.

Usage (from the repository root)::

    python experiments/long_horizon.py run --seeds 0 1 2 --steps 8
    python experiments/long_horizon.py report --steps 8

Example:
    >>> [name for name, _ in ARMS]
    ['full', 'window 3']
"""

from __future__ import annotations

from demo_runs import ROOT, comparison_parser, run_demo, run_folder, summaries, table, write_result

RUNS = ROOT / "outputs" / "experiments" / "long_horizon"
RESULT = ROOT / "experiments" / "out" / "long_horizon.json"  # _steps<N> is added to the name
TASK = ["--task", "rounds", "--advantage", "episode"]
# window: at most 32 of a step's 150-200 turn samples trained (each episode an equal share, reweighted: an unbiased
# estimate of the whole step's loss); all of them in one forward pass took more than the machine's 24 GiB, and 48
# were killed for memory at the eighth step while a test ran beside it
WINDOW = ["--history", "window", "--history-window", "3", "--max-turn-samples", "32"]
ARMS = [("full", ["--history", "full"]), ("window 3", WINDOW)]
FIGURES = {"rounds solved": "success", "first round solved": "first_round", "rounds played": "rounds_played"}


def run(seeds: list[int], steps: int, eval_episodes: int, threads: int | None, only: str | None) -> None:
    for seed in seeds:
        for name, flags in ARMS:
            if only is None or name == only:
                before = [] if seed == 0 else ["--skip-before"]  # the untrained model once: same seeds, same noise
                run_demo(
                    run_folder(RUNS, name, seed, steps), seed, steps, [*TASK, *flags, *before], eval_episodes, threads
                )


def report(steps: int) -> dict:
    shown: dict[str, dict] = {}
    for name, _ in ARMS:
        runs = summaries(RUNS, name, steps)
        after = {figure: [s["after"]["metric_means"][key] for s in runs] for figure, key in FIGURES.items()}
        befores = [s["before"]["metric_means"] for s in runs if s.get("before")]
        shown[name] = {
            "after": table(after),
            "before": {figure: befores[0][key] for figure, key in FIGURES.items()} if befores else None,
            "train_minutes": [round(s["train_seconds"] / 60, 1) for s in runs],
        }
    write_result(RESULT, steps, shown)
    print("| history | seeds | " + " | ".join(f"{f} (before → after, mean ± sd)" for f in FIGURES) + " | minutes |")
    print("|---|---|" + "---|" * len(FIGURES) + "---|")
    for name, row in shown.items():
        cells = []
        for figure in FIGURES:
            cell = row["after"].get(figure)
            before = f"{row['before'][figure]:.3f} → " if row["before"] else ""
            sd = f" ± {cell['sd']:.3f}" if cell and cell["sd"] is not None else ""
            cells.append(f"{before}{cell['mean']:.3f}{sd}" if cell else "n/a")
        seeds = row["after"]["rounds solved"]["seeds"] if row["after"] else 0
        print(f"| {name} | {seeds} | " + " | ".join(cells) + f" | {row['train_minutes']} |")
    return shown


def main() -> None:
    parser, _ = comparison_parser(__doc__.splitlines()[0], steps=8, only="one arm, e.g. 'window 3'")
    args = parser.parse_args()
    if args.command == "run":
        run(args.seeds, args.steps, args.eval_episodes, args.threads, args.only)
    report(args.steps)


if __name__ == "__main__":
    main()
