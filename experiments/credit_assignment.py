"""Plain GRPO against turn-level credit and tree rollouts, at equal training minutes.

Every run is ``demo/run_demo.py`` (``--task guess``: guess-the-number 1..16; ``--task doors``: vault doors,
where a wrong first answer makes success impossible; SmolLM2-135M-Instruct + LoRA, 2 secrets x 8
episodes per step) with one credit-assignment method and one training seed, trained for the same wall
time and evaluated on the demo's 128 held-out episodes with the same sampling noise. Runs go one at a
time, each in its own process (parallel runs on 2 cores would distort a time-bounded budget); a run
whose ``summary.json`` exists is not run again, so an interrupted comparison resumes.

Methods: ``episode`` (plain GRPO), ``turn`` (group-normalised return from each turn on), ``anchor``
(GiGPO-style step groups) and ``tree`` (tree rollouts forking after turns 1 and 2 into 2 branches each,
so 2 roots per group of 8, with ``advantage="tree"``). The recipe screen's arms (``RECIPES``) are plain GRPO
with one GRPO setting or one task option changed.

Usage (from the repository root)::

    python experiments/credit_assignment.py run --methods episode turn anchor tree --seeds 0   # screen
    python experiments/credit_assignment.py run --methods episode tree --seeds 0 1 2          # 3 seeds
    python experiments/credit_assignment.py report    # table, JSON and plot from every finished run
    python experiments/credit_assignment.py run --task doors --methods episode tree --seeds 0 1 2
    python experiments/credit_assignment.py run --methods episode grpo_loss kl_0.04 --seeds 0   # recipe screen
    python experiments/credit_assignment.py run --task doors --methods turn_kl_0.04 --seeds 0 1 2 3 4 \
        --earlier experiments/out/credit_assignment_doors.json                      # with the demo's guard

Example:
    >>> METHODS["tree"]
    ['--advantage', 'tree', '--tree', '1,2x2']
    >>> METHODS["turn_kl_0.04"]
    ['--advantage', 'turn', '--beta', '0.04']
    >>> smooth([0.0, 1.0, 0.5, 0.5], window=2)
    [0.0, 0.5, 0.75, 0.5]
    >>> first_reach([0.0, 1.0, 0.5, 0.5], [1.0, 2.0, 3.0, 4.0], level=0.7, window=2)   # step 3, at 3 minutes
    (3, 3.0)
    >>> first_reach([1.0, 0.0, 0.0], [1.0, 2.0, 3.0], level=0.9, window=2)   # a full window is needed first
    (None, None)
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from demo_runs import MEASURED_RECIPE

ROOT = Path(__file__).resolve().parents[1]
RUNS = ROOT / "outputs" / "experiments" / "credit_assignment"  # one folder per task
RESULT = ROOT / "experiments" / "out" / "credit_assignment_{task}.json"
PLOT = ROOT / "docs" / "credit_assignment_{task}.png"
SMOOTHING = 6  # steps in the curves' running mean: a step's 2 secrets make its own success rate very noisy
REACH = 0.5  # the training success rate whose first crossing the table reports (steps and minutes to reach it)
TITLES = {
    "guess": "guess-the-number 1..16",
    "doors": "vault doors (a wrong first answer ends the episode)",
}

# the demo's flags of each method
METHODS: dict[str, list[str]] = {
    "episode": ["--advantage", "episode"],
    "turn": ["--advantage", "turn"],
    "anchor": ["--advantage", "anchor"],
    "tree": ["--advantage", "tree", "--tree", "1,2x2"],  # 4 leaves per root
}
# the recipe screen: plain GRPO with one setting changed from the demo's (TRL's defaults: loss "dapo", the ratio
# clipped to 1 ± 0.2, no KL penalty, temperature 1; the demo's 2 secrets x 8 episodes per step), or one of the
# task-side options (the per-turn information reward, groups with equal rewards left out of the loss). No
# clip-higher arm: with one optimizer step per batch of episodes the ratio is exactly 1 and no clip ever binds.
RECIPES: dict[str, list[str]] = {
    "grpo_loss": ["--advantage", "episode", "--loss-type", "grpo"],
    "kl_0.04": ["--advantage", "episode", "--beta", "0.04"],
    "temperature_0.7": ["--advantage", "episode", "--temperature", "0.7"],
    "groups_4x4": ["--advantage", "episode", "--prompts-per-step", "4", "--generations", "4"],
    "info_gain": ["--advantage", "episode", "--reward", "info_gain"],
    "filter": ["--advantage", "episode", "--zero-variance", "filter"],
    # guards against drift (a seed that collapsed under the demo's 5e-4): half the learning rate
    "lr_2.5e-4": ["--advantage", "episode", "--lr", "2.5e-4"],
}
METHODS.update(RECIPES)
# the credit methods with the guard that held guess-the-number's seeds together (the demo's KL penalty)
METHODS.update({f"{method}_kl_0.04": [*METHODS[method], "--beta", "0.04"] for method in ("turn", "tree")})
# turn credit with the groups of equal rewards replaced by groups of new seeds (the default budget: one step's
# episodes more at most), for the doors runs whose door decision had few comparisons early on
METHODS["turn_resample"] = [*METHODS["turn"], "--zero-variance", "resample"]
# turn credit with the additive per-turn reward it was built for: on doors, a right door then pays the
# information its guesses gain even when the code is missed, where the ratio pays at most 0.3
METHODS["turn_info_gain"] = [*METHODS["turn"], "--reward", "info_gain"]
# turn credit with half the demo's KL penalty: 0.04 held doors seeds 0-4 on the door but capped the best ones
METHODS["turn_kl_0.02"] = [*METHODS["turn"], "--beta", "0.02"]
# turn credit with the KL penalty and 4 secrets x 4 episodes per step: a step's door decisions then cover more
# doors, so its gradient leans less towards one door (the doors runs that failed had collapsed onto one)
METHODS["turn_kl_0.04_4x4"] = [*METHODS["turn_kl_0.04"], "--prompts-per-step", "4", "--generations", "4"]
# turn credit with the KL penalty and each step's 3 secrets behind the 3 doors (6 episodes each): a policy that
# ignores the prompt then gains nothing from any one door within a step, so a step cannot lean towards the doors
# its secrets happened to draw (the collapsed runs had drifted onto one door)
METHODS["turn_kl_0.04_balanced"] = [
    *METHODS["turn_kl_0.04"],
    *("--balanced-doors", "--prompts-per-step", "3", "--generations", "6"),
]

# the demo's recipe with the LM head scoring every position, as TRL 1.16 does on CPU: the same-machine control for
# the default, which scores only the sampled tokens (the same training, about 1.5x the steps per minute)
METHODS["kl_0.04_every_position"] = [*METHODS["kl_0.04"], "--score-every-position"]
# the learning rate decays to 0 over the run's minutes (TRL's decays over max_steps, flat in a 10-minute run)
METHODS["kl_0.04_decay"] = [*METHODS["kl_0.04"], "--lr-decay", "minutes"]
METHODS["kl_0.04_decay_1e-3"] = [*METHODS["kl_0.04_decay"], "--lr", "1e-3"]  # the same mean rate as 5e-4 flat
# two optimizer steps on each batch of episodes (TRL's num_iterations): the second step's ratio is no longer 1, so
# the clip acts, at TRL's 0.2 or raised above ("clip-higher", DAPO's 0.28)
METHODS["kl_0.04_mu2"] = [*METHODS["kl_0.04"], "--num-iterations", "2"]
METHODS["kl_0.04_mu2_clip_higher"] = [*METHODS["kl_0.04_mu2"], "--epsilon-high", "0.28"]
# training ends on the weights that sampled the best 6-step stretch of training success, not on the last ones
METHODS["kl_0.04_keep_best"] = [*METHODS["kl_0.04"], "--keep-best"]


def run(
    task: str,
    methods: list[str],
    seeds: list[int],
    minutes: float,
    threads: int,
    runs: Path = RUNS,
    demo_args: list[str] = (),
) -> None:
    """Train and evaluate every (method, seed) of ``task`` not yet done, one at a time, seeds outermost.

    ``demo_args`` go to every demo run (the tests pass ``--smoke --model DIR``).
    """
    runs = runs / task
    pending = [(m, s) for s in seeds for m in methods if not (runs / f"{m}-seed{s}" / "summary.json").exists()]
    for index, (method, seed) in enumerate(pending, 1):
        out = runs / f"{method}-seed{seed}"
        command = [sys.executable, str(ROOT / "demo" / "run_demo.py"), "--task", task, "--skip-before"]
        command += ["--seed", str(seed), *MEASURED_RECIPE]
        command += ["--minutes", str(minutes), "--threads", str(threads), "--out-dir", str(out), *METHODS[method]]
        command += list(demo_args)
        print(f"[{index}/{len(pending)}] {method} seed {seed}: {' '.join(command[1:])}", flush=True)
        started = time.perf_counter()
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "run.log", "w") as log:
            result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        if result.returncode != 0:
            raise SystemExit(f"{method} seed {seed} failed (exit {result.returncode}): see {out / 'run.log'}")
        summary = json.loads((out / "summary.json").read_text())
        print(
            f"    held-out success {summary['after']['success_rate']:.3f} after {summary['steps']} steps "
            f"({(time.perf_counter() - started) / 60:.1f} min in all)",
            flush=True,
        )


def smooth(values: list[float], window: int = 3) -> list[float]:
    """Trailing running mean over ``window`` points."""
    return [statistics.fmean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def first_reach(
    success: list[float], minutes: list[float], level: float = REACH, window: int = SMOOTHING
) -> tuple[int | None, float | None]:
    """(point, training minutes) at which the running mean of the last ``window`` points' training success first
    reaches ``level`` (points count from 1: the steps that played episodes); (None, None) if it never does.
    Only full windows count, so one lucky early step (2 secrets) cannot reach it alone."""
    for index in range(window - 1, len(success)):
        if statistics.fmean(success[index - window + 1 : index + 1]) >= level:
            return index + 1, minutes[index]
    return None, None


def training_curve(history: list[dict[str, Any]]) -> tuple[list[float], list[float], list[int]]:
    """(training minutes at the end of each step that played episodes, their success rate, the optimizer step).

    With ``--num-iterations`` > 1 the steps that train a batch again play none, but their time counts.

    Example:
        >>> training_curve([{"step": 1, "step_time": 30, "env/success_rate": 0.5}, {"step": 2, "step_time": 30},
        ...                 {"step": 3, "step_time": 60, "env/success_rate": 1.0}, {"train_runtime": 120}])
        ([0.5, 2.0], [0.5, 1.0], [1, 3])
    """
    minutes, success, steps, elapsed = [], [], [], 0.0
    for entry in history:
        elapsed += entry.get("step_time", 0) / 60
        if "env/success_rate" in entry:
            minutes.append(elapsed)
            success.append(entry["env/success_rate"])
            steps.append(entry["step"])
    return minutes, success, steps


def group_means(history: list[dict[str, Any]]) -> dict[str, float]:
    """Mean per step of the ``groups/*`` metrics (logged under ``--zero-variance filter``/``resample`` only).

    Example:
        >>> group_means([{"groups/extra_episodes": 16.0, "step_time": 1}, {"groups/extra_episodes": 0.0}, {"loss": 1}])
        {'extra_episodes': 8.0}
    """
    names = sorted({key for entry in history for key in entry if key.startswith("groups/")})
    return {
        name.removeprefix("groups/"): statistics.fmean(entry[name] for entry in history if name in entry)
        for name in names
    }


def top_first_answer_share(transcripts: Path) -> float | None:
    r"""The share of held-out episodes whose first answer names the most common number (the first whole number
    in the answer, as the envs read it; an answer without one counts as its own kind): 1.0 means every episode
    opens with the same number, e.g. the same door. None without transcripts.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "t.jsonl"
        >>> answers = ["1", "1\n\nJust one", "2", "door 1", "none"]
        >>> _ = path.write_text("".join(json.dumps({"turns": [{"action": a}]}) + "\n" for a in answers))
        >>> top_first_answer_share(path)
        0.6
    """
    if not transcripts.exists():
        return None
    firsts = []
    for record in map(json.loads, transcripts.read_text().splitlines()):
        number = re.search(r"-?\d+", record["turns"][0]["action"]) if record["turns"] else None
        firsts.append(number.group() if number else None)
    return max(firsts.count(first) for first in set(firsts)) / len(firsts) if firsts else None


def collect(folder: Path = RUNS) -> dict[str, list[dict[str, Any]]]:
    """Every finished run under ``folder``, by method."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for summary_path in sorted(folder.glob("*/summary.json")):
        method, seed = summary_path.parent.name.rsplit("-seed", 1)
        summary = json.loads(summary_path.read_text())
        history = json.loads((summary_path.parent / "log_history.json").read_text())
        minutes, success, steps = training_curve(history)
        reach_point, reach_minutes = first_reach(success, minutes)
        reach_step = steps[reach_point - 1] if reach_point is not None else None  # an optimizer step
        runs.setdefault(method, []).append(
            {
                "seed": int(seed),
                "heldout_success": summary["after"]["success_rate"],
                "heldout_reward": summary["after"]["mean_reward"],
                "heldout_turns": summary["after"]["mean_turns"],
                "heldout_metrics": summary["after"].get("metric_means", {}),  # vault doors: right_door
                # --demo-args --greedy-eval: the same seeds decoded greedily
                "heldout_greedy_success": (summary.get("after_greedy") or {}).get("success_rate"),
                "steps": summary["steps"],
                "train_minutes": summary["train_seconds"] / 60,
                "curve_minutes": minutes,
                "curve_success": success,
                "reach_level": REACH,
                "reach_step": reach_step,
                "reach_minutes": reach_minutes,
                "groups": group_means(history),  # --zero-variance: extra episodes per step, groups replaced, ...
                "top_first_answer_share": top_first_answer_share(summary_path.parent / "transcripts_after.jsonl"),
            }
        )
    return runs


def _or_dash(value: float | None, form: str) -> str:
    return "-" if value is None else form.format(value)


def _mean_and_values(values: list[float | None]) -> str:
    """Two table cells: the mean ± sd of the values there are, and every value (- where missing)."""
    present = [v for v in values if v is not None]
    mean = f"{statistics.fmean(present):.3f}" if present else "-"
    spread = f" ± {statistics.stdev(present):.3f}" if len(present) > 1 else ""
    return f"{mean}{spread} | {', '.join(_or_dash(v, '{:.3f}') for v in values)} | "


def table(runs: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown table: held-out success after the same training minutes (mean, spread, per seed), steps in the
    budget, and per seed the step and minute at which training success first reached ``REACH`` (- if never)."""
    doors = any("right_door" in r.get("heldout_metrics", {}) for rows in runs.values() for r in rows)
    greedy = any(r.get("heldout_greedy_success") is not None for rows in runs.values() for r in rows)
    lines = [
        f"| method | seeds | held-out success, mean ± sd | per seed | {'greedy, mean ± sd | per seed | ' * greedy}"
        f"{'right door, per seed | ' * doors}steps | mean turns | steps to {REACH:.0%} | minutes to {REACH:.0%} |",
        "|---|---|---|---|---|---|---|---|" + "---|" * (doors + 2 * greedy),
    ]
    for method in sorted(runs, key=lambda m: -statistics.fmean(r["heldout_success"] for r in runs[m])):
        rows = sorted(runs[method], key=lambda r: r["seed"])
        right = [r.get("heldout_metrics", {}).get("right_door") for r in rows]
        lines.append(
            f"| {method} | {len(rows)} | {_mean_and_values([r['heldout_success'] for r in rows])}"
            f"{_mean_and_values([r.get('heldout_greedy_success') for r in rows]) * greedy}"
            f"{(', '.join(_or_dash(v, '{:.3f}') for v in right) + ' | ') * doors}"
            f"{', '.join(str(r['steps']) for r in rows)} | "
            f"{statistics.fmean(r['heldout_turns'] for r in rows):.2f} | "
            f"{', '.join(_or_dash(r['reach_step'], '{}') for r in rows)} | "
            f"{', '.join(_or_dash(r['reach_minutes'], '{:.1f}') for r in rows)} |"
        )
    return "\n".join(lines)


def plot(runs: dict[str, list[dict[str, Any]]], path: Path, title: str) -> Path:
    """Training-episode success (running mean over ``SMOOTHING`` steps) against training minutes: one line per
    method, the mean over seeds, shaded between the lowest and highest seed; the held-out success as a marker
    (the mean over seeds, with bars to the lowest and highest)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    figure, axes = plt.subplots(figsize=(7.5, 4.2))
    for index, method in enumerate(sorted(runs)):
        colour = f"C{index}"
        rows = runs[method]
        end = min(r["curve_minutes"][-1] for r in rows)
        grid = np.linspace(min(r["curve_minutes"][0] for r in rows), end, 60)
        curves = np.array([np.interp(grid, r["curve_minutes"], smooth(r["curve_success"], SMOOTHING)) for r in rows])
        label = f"{method} ({len(rows)} seed{'s' if len(rows) > 1 else ''})"
        axes.plot(grid, curves.mean(axis=0), color=colour, label=label)
        if len(rows) > 1:
            axes.fill_between(grid, curves.min(axis=0), curves.max(axis=0), color=colour, alpha=0.2)
        heldout = [r["heldout_success"] for r in rows]
        axes.errorbar(
            [end + 0.3 + 0.15 * index],
            [statistics.fmean(heldout)],
            yerr=[[statistics.fmean(heldout) - min(heldout)], [max(heldout) - statistics.fmean(heldout)]],
            fmt="s",
            color=colour,
            capsize=3,
        )
    axes.set_xlabel("training minutes (2 CPU cores)")
    axes.set_ylabel("success rate")
    axes.set_title(f"{title}, SmolLM2-135M\ntraining episodes (lines), held-out after training (squares)", fontsize=10)
    axes.set_ylim(0, 1)
    axes.legend(loc="best", fontsize=8)  # where it hides the fewest points
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def with_earlier(runs: dict[str, list[dict[str, Any]]], earlier: Path) -> dict[str, list[dict[str, Any]]]:
    """``runs`` plus the rows of an earlier result JSON whose (method, seed) has no run folder now.

    Example:
        >>> import json, tempfile
        >>> path = Path(tempfile.mkdtemp()) / "old.json"
        >>> _ = path.write_text(json.dumps({"turn": [{"seed": 0, "x": 1}, {"seed": 3, "x": 2}]}))
        >>> with_earlier({"turn": [{"seed": 3, "x": 9}]}, path)
        {'turn': [{'seed': 3, 'x': 9}, {'seed': 0, 'x': 1}]}
    """
    merged = {method: list(rows) for method, rows in runs.items()}
    for method, rows in json.loads(earlier.read_text()).items():
        have = {row["seed"] for row in merged.get(method, [])}
        merged.setdefault(method, []).extend(row for row in rows if row["seed"] not in have)
    return merged


def report(
    task: str,
    folder: Path = RUNS,
    result: str | Path = RESULT,
    plot_path: str | Path = PLOT,
    earlier: str | Path | None = None,
    plot_methods: list[str] | None = None,
) -> None:
    """Print the table of ``task``'s runs, write the JSON and the plot (``{task}`` in a path is the task).

    ``earlier``: a result JSON written before, whose rows are kept for runs whose folders are gone.
    ``plot_methods``: the methods the plot shows (default all; the table and the JSON keep every run).
    """
    folder, result = folder / task, Path(str(result).format(task=task))
    plot_path = Path(str(plot_path).format(task=task))
    runs = collect(folder) if folder.exists() else {}
    if earlier is not None:
        runs = with_earlier(runs, Path(str(earlier).format(task=task)))
    if not runs:
        raise SystemExit(f"no finished runs under {folder}: run `python experiments/credit_assignment.py run` first")
    print(table(runs))
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps(runs, indent=1))
    shown = {method: rows for method, rows in runs.items() if plot_methods is None or method in plot_methods}
    if not shown:
        raise SystemExit(f"none of the methods {plot_methods} has a finished run under {folder}")
    print(f"results: {result}\nplot: {plot(shown, plot_path, TITLES[task])}")


def main(argv: list[str] | None = None) -> int:
    """Command line: ``run`` or ``report``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="train and evaluate the runs not done yet")
    run_parser.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=sorted(METHODS))
    run_parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    run_parser.add_argument("--minutes", type=float, default=10.0, help="training wall time per run (default 10)")
    run_parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    run_parser.add_argument("--demo-args", default="", help="more flags for every demo run, e.g. '--smoke'")
    report_parser = commands.add_parser("report", help="table, JSON and plot of the finished runs")
    report_parser.add_argument(
        "--methods", nargs="+", choices=sorted(METHODS), help="the methods the plot shows (default all)"
    )
    for sub in (run_parser, report_parser):
        sub.add_argument("--task", choices=sorted(TITLES), default="guess", help="the demo's task (default guess)")
        sub.add_argument("--runs", type=Path, default=RUNS, help=f"the runs' folder (default {RUNS})")
        sub.add_argument("--result", default=str(RESULT), help=f"the JSON written (default {RESULT})")
        sub.add_argument("--plot", default=str(PLOT), help=f"the plot written (default {PLOT})")
        sub.add_argument("--earlier", help="an earlier result JSON: its rows stay for runs whose folders are gone")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args.task, args.methods, args.seeds, args.minutes, args.threads, args.runs, args.demo_args.split())
    report(
        args.task, args.runs, args.result, args.plot, args.earlier, args.methods if args.command == "report" else None
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
