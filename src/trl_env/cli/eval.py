"""``trl-env eval``: play sampled episodes with a local model and report how it does.

Success and other per-episode figures come from the environment's ``metrics()`` (see
:mod:`trl_env.evaluation`). Seeds come from ``--seeds a,b,c`` or ``--seeds-file`` (one per
line), cycled or cut to ``--episodes``; without either they are ``eval-0 .. eval-{N-1}``.
``--top-k 1`` decodes greedily (the model's most likely answer) instead of sampling.
``--out`` writes one JSON line per episode: its seed, reward, metrics, turns (model text, parsed
action, env answer, turn reward), token counts and the whole text.

The summary is always printed; the exit status is 1 when every episode failed in its env, or more
than ``--max-failure-rate`` of them (default 0.5, as in training), since such figures measure the env's
failures rather than the model.

Example:
    >>> main(["eval", "--env", "examples.guess_number:GuessNumberEnv", "--model", str(tiny_model_dir),
    ...       "--episodes", "2", "--max-turns", "2", "--max-turn-tokens", "4", "--no-progress", "--json"])
    {"episodes": 2, ...}
    0
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from trl_env.cli.arguments import (
    UsageError,
    add_config_arguments,
    add_model_arguments,
    build_processor,
    config_from_args,
    load_model,
    read_seeds,
)
from trl_env.cli.env_factory import add_env_arguments, env_factory_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``eval`` subcommand."""
    parser = subparsers.add_parser(
        "eval",
        help="evaluate a model on an environment with sampled episodes",
        description="Evaluate a model on an environment with sampled episodes.",
    )
    add_env_arguments(parser)
    add_model_arguments(parser)
    add_config_arguments(parser)
    parser.add_argument("--episodes", type=int, default=None, help="number of episodes (default: all seeds, or 64)")
    parser.add_argument(
        "--top-k", type=int, help="sample among the K most likely tokens only; 1: greedy decoding (default: all)"
    )
    parser.add_argument("--batch-size", type=int, default=64, help="episodes per batch (default 64)")
    parser.add_argument("--out", help="write one JSON line per episode to this file")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    parser.add_argument(
        "--max-failure-rate",
        type=float,
        default=0.5,
        help="exit 1 when more than this fraction of the episodes failed in their env, and always when all did "
        "(default 0.5)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load the model, play the episodes, print the summary and write the JSONL file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if not 0.0 <= args.max_failure_rate <= 1.0:
        raise UsageError(f"--max-failure-rate must be in [0, 1], got {args.max_failure_rate}")
    if args.top_k is not None and args.top_k < 1:
        raise UsageError(f"--top-k must be at least 1 (1: greedy decoding), got {args.top_k}")
    factory = env_factory_from_args(args)
    config = config_from_args(args)
    seeds = read_seeds(args.seeds, args.seeds_file, args.episodes)
    tokenizer, model = load_model(args.model)

    import torch

    from trl_env.evaluation import evaluate

    torch.manual_seed(args.seed)
    summary = evaluate(
        factory,
        model,
        tokenizer,
        seeds,
        processor=build_processor(args, tokenizer),
        config=config,
        temperature=args.temperature,
        top_k=args.top_k,
        batch_size=args.batch_size,
        progress=args.progress,
        autocast_dtype=torch.bfloat16 if args.bf16 else None,
    )
    if args.out:
        summary.write_jsonl(args.out)
    print(json.dumps(summary.metrics()) if args.json else summary.format())
    if args.out and not args.json:
        print(f"wrote {summary.episodes} episodes to {args.out}")
    return _exit_status(summary.env_errors, summary.episodes, args.max_failure_rate, summary.first_error)


def _exit_status(failed: int, episodes: int, max_rate: float, first_error: str | None) -> int:
    """0, or 1 with one line on stderr when all episodes, or more than ``max_rate`` of them, failed.

    Example:
        >>> _exit_status(1, 4, 0.5, "E (seed='a', turn=0): exception: ValueError: x")
        0
        >>> import contextlib, io
        >>> with contextlib.redirect_stderr(io.StringIO()) as err:
        ...     _exit_status(3, 4, 0.5, "E (seed='a', turn=0): exception: ValueError: x")
        1
        >>> print(err.getvalue().strip())
        trl-env: 3 of 4 episodes failed in their env (more than --max-failure-rate 0.5); first error: E (seed='a'...
    """
    if episodes == 0 or not failed:
        return 0
    if failed == episodes:
        head = f"every episode failed in its env ({failed} of {episodes})"
    elif failed / episodes > max_rate:
        head = f"{failed} of {episodes} episodes failed in their env (more than --max-failure-rate {max_rate})"
    else:
        return 0
    first = " ".join((first_error or "").split())
    print(f"trl-env: {head}; first error: {first}", file=sys.stderr)
    return 1
