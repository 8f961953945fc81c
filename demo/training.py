"""The demo's training run: GRPO with a LoRA adapter, the plan's budgets and the flags' method.

Imports TRL (through trl_env's recipe): ``run_demo.py`` imports it once the environment is set.

Example:
    >>> trainer, seconds = train_policy(args, plan, factory, model, tokenizer, processor, False, out)  # doctest: +SKIP
    >>> trainer.state.global_step  # doctest: +SKIP
    15
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from demo.plan import DemoPlan
from demo.tasks import TASKS
from examples.guess_number import train_seeds
from examples.vault_doors import interleave_doors
from trl_env.trainer.keep_best import kept_best
from trl_env.trainer.recipe import TrainSettings, build_trainer


def train_policy(
    args: argparse.Namespace,
    plan: DemoPlan,
    env_factory: Callable[[], Any],
    model: Any,
    tokenizer: Any,
    processor: Any,
    bf16: bool,
    out: Path,
) -> tuple[Any, float]:
    """Train ``model`` on the task's training seeds; the trainer (its state holds the log) and the seconds it took.

    Prints the method and budget before training and each step's reward after.
    """
    settings = TrainSettings(
        steps=args.max_steps or plan.max_steps,
        lr=plan.lr,
        lr_decay=plan.lr_decay,
        keep_best="env/success_rate" if plan.keep_best else None,
        beta=plan.beta,
        temperature=plan.temperature,
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
            max_turn_samples=args.max_turn_samples,
        ),
        advantage=args.advantage,
        gamma=args.gamma,
        max_staleness=args.max_staleness,
        score_sampled_only=not args.score_every_position,
        extra_args=recipe_args(plan)
        | ({"vllm_importance_sampling_correction": False} if args.no_is_correction else {})
        | ({"shuffle_dataset": False} if args.balanced_doors else {}),  # the rotation holds only if taken in order
    )
    trainer = build_trainer(
        env_factory,
        model,
        tokenizer,
        training_seeds(args.seed, args.balanced_doors),
        settings,
        processor=processor,
    )
    method = f"{args.advantage} advantages" + (f", tree {args.tree}" if args.tree else "")
    method += f", zero-variance groups: {args.zero_variance}" if args.zero_variance != "keep" else ""
    method += "".join(f", {key} {value}" for key, value in recipe_args(plan).items())
    method += f", beta {plan.beta:g}" if plan.beta else ""
    method += f", temperature {plan.temperature:g}" if plan.temperature != 1.0 else ""
    method += f", lr {plan.lr:g}" + (" decaying to 0 over the minutes" if plan.lr_decay == "minutes" else "")
    method += ", ending on the best 6-step stretch of training success" if plan.keep_best else ""
    method += ", secrets rotating through the doors" if args.balanced_doors else ""
    print(
        f"\n== training with GRPO ({method}) for at most {plan.minutes:g} minutes "
        f"({settings.batch_size} episodes per step)"
    )
    train_start = time.perf_counter()
    trainer.train()
    train_seconds = time.perf_counter() - train_start
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']:>3}  reward {entry['reward']:.3f}")
    if (kept := kept_best(trainer)) is not None:
        print(
            f"kept the weights that sampled step {kept['step']} of {kept['steps']} (running {kept['metric']} "
            f"{kept['best']} over {kept['window']} steps)"
            if kept["restored"]
            else f"kept the last weights: fewer than {kept['window']} steps were logged"
        )
    return trainer, train_seconds


def training_seeds(seed: int, balanced_doors: bool = False) -> list[str]:
    """The training secrets of training seed ``seed``; with ``balanced_doors``, in vault doors' door rotation.

    Args:
        seed: the run's training seed (``--seed``): it draws the secrets.
        balanced_doors: reorder them so that consecutive secrets lead through doors 1, 2, 3 in turn
            (:func:`examples.vault_doors.interleave_doors`); training must then take them unshuffled.

    Returns:
        About 4,096 seeds (a few fewer when rotated: each door keeps as many as the rarest).

    Example:
        >>> from examples.vault_doors import door_for_seed
        >>> [door_for_seed(s, 3) for s in training_seeds(0, balanced_doors=True)[:4]], len(training_seeds(0))
        ([1, 2, 3, 1], 4096)
    """
    seeds = train_seeds(4 * 1024, rng_seed=seed)
    if not balanced_doors:
        return seeds
    return interleave_doors(seeds, TASKS["doors"][1]["doors"])


def recipe_args(plan: DemoPlan) -> dict[str, Any]:
    """The GRPO settings the plan changes from TRL's defaults (``loss_type``, ``epsilon_high``, ``num_iterations``),
    as ``GRPOConfig`` keywords.

    Example:
        >>> recipe_args(DemoPlan.full(10)), recipe_args(DemoPlan(10, 1, 1, 8, 2, loss_type="grpo", num_iterations=2))
        ({}, {'loss_type': 'grpo', 'num_iterations': 2})
    """
    found = {"loss_type": plan.loss_type, "epsilon_high": plan.epsilon_high, "num_iterations": plan.num_iterations}
    return {key: value for key, value in found.items() if value is not None}
