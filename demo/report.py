"""The demo's report: the before/after table, the reward curve, the transcript page and ``summary.json``.

Example:
    >>> print(comparison_table(None, after))  # doctest: +SKIP
                           before    after
    success rate              nan    0.617
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from demo.plan import DemoPlan

if TYPE_CHECKING:  # matplotlib and trl_env's viewer are imported when used: the table needs neither
    from trl_env.evaluation import EvalSummary


# the trainer's GRPO settings written to summary.json: the recipe a comparison varies, read back from the trainer
GRPO_RECORDED = (
    "loss_type",
    "epsilon",
    "epsilon_high",
    "num_iterations",
    "beta",
    "temperature",
    "num_generations",
    "per_device_train_batch_size",
    "learning_rate",
)


def plot_reward_curve(
    history: list[dict[str, Any]], before: EvalSummary | None, after: EvalSummary, path: Path
) -> Path:
    """Plot the per-step training reward with its running mean and the held-out before/after means.

    Example:
        >>> plot_reward_curve([{"step": 1, "reward": 0.1}], before, after, Path("curve.png"))  # doctest: +SKIP
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(h["step"], h["reward"]) for h in history if "reward" in h]
    figure, axes = plt.subplots(figsize=(7, 4))
    if points:
        steps, rewards = zip(*points, strict=True)
        window = 5
        running = [
            sum(rewards[max(0, i - window + 1) : i + 1]) / len(rewards[max(0, i - window + 1) : i + 1])
            for i in range(len(rewards))
        ]
        axes.plot(steps, rewards, "o", alpha=0.4, label="training reward (per step)")
        axes.plot(steps, running, "-", label=f"running mean ({window} steps)")
    if before is not None:
        label = f"held-out before: {before.mean_reward:.2f}"
        axes.axhline(before.mean_reward, color="grey", linestyle="--", label=label)
    axes.axhline(after.mean_reward, color="green", linestyle="--", label=f"held-out after: {after.mean_reward:.2f}")
    axes.set_xlabel("GRPO step")
    axes.set_ylabel("episode reward (1 solved + shaping or information)")
    axes.set_title("guess-the-number, SmolLM2-135M-Instruct + LoRA, GRPO on CPU")
    axes.legend(loc="upper left", fontsize=8)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def headline(summary: EvalSummary) -> dict[str, float]:
    """The demo's headline numbers of one evaluation; the answer rates are pooled over all answers.

    Example:
        >>> from trl_env.evaluation import EvalSummary
        >>> r = {"reward": 1.3, "num_turns": 2, "parse_failures": 0, "stop_reason": "done", "error": None,
        ...      "metrics": {"success": 1.0, "answers": 2.0, "valid_guesses": 2.0, "consistent_guesses": 1.0}}
        >>> headline(EvalSummary.from_records([r]))["consistency rate"]
        0.5
    """
    sums = summary.metric_sums
    answers = sums.get("answers", 0.0) or float("nan")
    return {
        "success rate": summary.success_rate,
        "mean reward": summary.mean_reward,
        "valid-answer rate": sums.get("valid_guesses", 0.0) / answers,
        "consistency rate": sums.get("consistent_guesses", 0.0) / answers,
        "mean turns": summary.mean_turns,
        "parse-failure rate": summary.parse_failure_rate,
    }


def comparison_table(before: EvalSummary | None, after: EvalSummary) -> str:
    """Before/after table of the headline numbers (``before`` None: the after column only)."""
    second = headline(after)
    first = headline(before) if before is not None else {name: float("nan") for name in second}
    lines = [f"{'':<20} {'before':>8} {'after':>8}"]
    lines += [f"{name:<20} {first[name]:>8.3f} {second[name]:>8.3f}" for name in second]
    return "\n".join(lines)


def write_report(
    out: Path,
    *,
    args: argparse.Namespace,
    plan: DemoPlan,
    model_dir: Path,
    trainer: Any,
    before: EvalSummary | None,
    after: EvalSummary,
    greedy: tuple[EvalSummary | None, EvalSummary | None] = (None, None),
    heldout_episodes: int,
    train_seconds: float,
    started: float,
    bf16: bool,
    threads: int,
    env_kwargs: dict[str, Any],
) -> dict[str, Any]:
    """Print the before/after table and write the reward curve, the transcript page, the summary and the log.

    ``greedy``: the before and after evaluations decoded greedily (``--greedy-eval``), or None.
    ``heldout_episodes``: the seeds each evaluation played. ``started`` is the demo's start
    (``time.perf_counter()``): the summary records the whole demo's seconds.
    Returns the summary written to ``out/summary.json``.
    """
    print(f"\n== before vs after ({heldout_episodes} held-out episodes, sampled at temperature 1)")
    print(comparison_table(before, after))
    if greedy[1] is not None:
        print(f"\n== decoded greedily (the most likely answer each turn), {heldout_episodes} held-out episodes")
        print(comparison_table(*greedy))
    plot_reward_curve(trainer.state.log_history, before, after, out / "reward_curve.png")
    from trl_env.trainer.keep_best import kept_best
    from trl_env.viewer import write_page

    # the held-out episodes before and after, on one page (filter by step: 0 = before, 1 = after)
    records = [{**r, "step": 0} for r in (before.records if before else [])] + [{**r, "step": 1} for r in after.records]
    page = write_page(records, out / "transcripts.html", title="trl-env demo: held-out episodes before (0) / after (1)")
    print(f"transcripts page: {page}")
    summary = {
        "seed": args.seed,
        "smoke": args.smoke,
        "model": str(model_dir),
        "steps": trainer.state.global_step,
        "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - started,
        "answer_prefix": args.answer_prefix,
        "bf16": bf16,
        "threads": threads,
        "task": args.task,
        "reward": args.reward,
        "env_kwargs": env_kwargs,  # what the env factory was built with
        "advantage": args.advantage,
        "gamma": args.gamma,
        "tree": args.tree,
        "zero_variance": args.zero_variance,
        "max_extra_episodes": args.max_extra_episodes,
        "max_turn_samples": args.max_turn_samples,
        "before": {**before.metrics(), **headline(before)} if before is not None else None,
        "after": {**after.metrics(), **headline(after)},
        **{
            f"{label}_greedy": {**evaluation.metrics(), **headline(evaluation)}
            for label, evaluation in zip(("before", "after"), greedy, strict=True)
            if evaluation is not None
        },
        "kept_best": kept_best(trainer),  # --keep-best: the step whose weights were evaluated (None: the last)
        "plan": plan.__dict__,
        "grpo": {key: getattr(trainer.args, key) for key in GRPO_RECORDED},  # as the trainer ran, defaults included
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    return summary
