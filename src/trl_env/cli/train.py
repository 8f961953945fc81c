"""``trl-env train``: GRPO on a multi-turn environment with TRL's ``GRPOTrainer``.

Each step draws ``--prompts-per-step`` seeds and plays ``--num-generations`` episodes of
each (one GRPO group per seed) through :func:`~trl_env.trainer.rollout_func.make_rollout_func`; the
reward is the environment's. ``--lora-r 0`` trains all weights, otherwise a LoRA adapter
on every linear layer (peft); the saved model is always a plain, merged model directory
that ``trl-env eval --model`` reads. ``--max-minutes`` stops training after a wall-time
budget (checked after every step). The recipe itself is :mod:`trl_env.trainer.recipe`.
It exits 1 when training stops because the envs fail (every episode of a step, or more than half over
10 steps: :class:`~trl_env.trainer.failures.EnvFailuresError`); no model is saved then.

Example:
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as printed:
    ...     status = main(["train", "--env", "examples.guess_number:GuessNumberEnv", "--model", str(tiny_model_dir),
    ...                    "--steps", "1", "--num-generations", "2", "--prompts-per-step", "1", "--max-turns", "2",
    ...                    "--max-turn-tokens", "4", "--max-completion-tokens", "64", "--output-dir", str(tmp_path),
    ...                    "--advantage", "turn", "--transcripts-every", "1"])
    >>> status, printed.getvalue().splitlines()[-1].startswith("trained 1 steps; model saved to")
    (0, True)
    >>> len((tmp_path / "transcripts.jsonl").read_text().splitlines())  # step 0's episodes, for trl-env view
    2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from trl_env.cli.arguments import (
    add_config_arguments,
    add_model_arguments,
    build_processor,
    config_from_args,
    load_model,
    read_seeds,
)
from trl_env.cli.env_factory import add_env_arguments, env_factory_from_args
from trl_env.cli.usage import UsageError
from trl_env.errors import ConfigError
from trl_env.trainer.setting_checks import check_lr_decay


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``train`` subcommand."""
    parser = subparsers.add_parser(
        "train",
        help="train a model on an environment with GRPO (TRL)",
        description="Train a model on an environment with GRPO (TRL).",
    )
    add_env_arguments(parser)
    add_model_arguments(parser)
    add_config_arguments(parser, defaults={"max_completion_tokens": 1024})  # TRL needs a completion budget
    parser.add_argument(
        "--num-seeds", type=int, default=None, help="training seeds train-0..train-{N-1} (default 1024)"
    )
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop after this much training wall time")
    parser.add_argument("--lr", type=float, default=2e-4, help="learning rate (default 2e-4)")
    parser.add_argument(
        "--lr-decay",
        choices=("steps", "minutes"),
        default="steps",
        help="steps: TRL's linear decay over --steps (default); minutes: linearly to 0 over --max-minutes",
    )
    parser.add_argument(
        "--keep-best",
        metavar="METRIC",
        help="end on the weights that sampled the best 6-step running mean of this logged metric, e.g. "
        "env/success_rate (default: the last weights)",
    )
    parser.add_argument("--num-generations", type=int, default=8, help="episodes per seed (GRPO group size)")
    parser.add_argument("--prompts-per-step", type=int, default=2, help="seeds per optimizer step (default 2)")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank on all linear layers; 0 = full fine-tuning")
    parser.add_argument("--lora-alpha", type=int, default=None, help="LoRA alpha (default 2 * rank)")
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient (default 0: no reference model)")
    parser.add_argument("--report-to", default="none", help="TRL/transformers report_to (default none)")
    parser.add_argument("--output-dir", default="outputs/train", help="where the merged model and logs go")
    parser.add_argument(
        "--advantage",
        choices=("episode", "turn", "anchor", "tree"),
        default="episode",
        help="credit assignment: plain GRPO (episode), turn returns (turn), anchor states (GiGPO-style), or "
        "tree (with --tree: shared prefixes credited once)",
    )
    parser.add_argument("--gamma", type=float, default=1.0, help="discount of later turns (turn, anchor)")
    parser.add_argument(
        "--max-staleness",
        type=int,
        default=0,
        help="pipelined rollouts: play the next N steps' episodes while a step trains, with a policy at most N "
        "optimizer steps old, importance-sampling corrected (default 0: every step waits for its own episodes)",
    )
    parser.add_argument(
        "--transcripts-every",
        type=int,
        default=None,
        help="record every N-th step's episodes to OUTPUT_DIR/transcripts.jsonl (see trl-env view)",
    )
    parser.add_argument(
        "--transcripts-per-step", type=int, default=4, help="episodes recorded per recorded step (default 4; 0: all)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load the model, train, save the merged model and the log history."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:  # before the model loads
        check_lr_decay(args.lr_decay, args.max_minutes)
    except ConfigError as error:
        raise UsageError(str(error)) from None
    factory = env_factory_from_args(args)
    config = config_from_args(args)
    num_seeds = args.num_seeds if args.num_seeds is not None else (None if args.seeds or args.seeds_file else 1024)
    seeds = read_seeds(args.seeds, args.seeds_file, num_seeds, default_prefix="train-")
    tokenizer, model = load_model(args.model, train=True)

    import torch

    from trl_env.trainer.recipe import TrainSettings, build_trainer, save_merged

    torch.manual_seed(args.seed)
    settings = TrainSettings(
        steps=args.steps,
        lr=args.lr,
        num_generations=args.num_generations,
        prompts_per_step=args.prompts_per_step,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        beta=args.beta,
        temperature=args.temperature,
        max_minutes=args.max_minutes,
        lr_decay=args.lr_decay,
        keep_best=args.keep_best,
        seed=args.seed,
        output_dir=args.output_dir,
        report_to=args.report_to,
        bf16=args.bf16,
        rollout=config,
        advantage=args.advantage,
        gamma=args.gamma,
        max_staleness=args.max_staleness,
        transcripts_every=args.transcripts_every,
        transcripts_per_step=args.transcripts_per_step or None,
    )
    from trl_env.trainer.failures import EnvFailuresError

    trainer = build_trainer(factory, model, tokenizer, seeds, settings, processor=build_processor(args, tokenizer))
    try:
        trainer.train()
    except EnvFailuresError as error:
        print(f"trl-env: training stopped: {error}", file=sys.stderr)
        return 1
    path = save_merged(trainer, tokenizer, Path(args.output_dir) / "final")
    (Path(args.output_dir) / "log_history.json").write_text(json.dumps(trainer.state.log_history, indent=1))
    print(f"trained {trainer.state.global_step} steps; model saved to {path}")
    return 0
