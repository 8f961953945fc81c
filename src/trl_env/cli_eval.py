"""``trl-env eval``: play sampled episodes with a local model and report how it does.

Success means the final environment's ``solved`` attribute is True or, for an environment
without one, a reward of at least 1.0 (see :mod:`trl_env.evaluation`). Seeds come from
``--seeds a,b,c`` or ``--seeds-file`` (one per line), cycled or cut to ``--episodes``;
without either they are ``eval-0 .. eval-{N-1}``. ``--out`` writes one JSON line per
episode: its seed, reward, success, turns (model text, parsed action, env answer), token
counts and the whole text.

Example:
    >>> main(["eval", "--env", "examples.guess_number:GuessNumberEnv", "--model", "./model",
    ...       "--episodes", "128", "--max-turns", "5", "--max-turn-tokens", "6"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

from trl_env.chunked_processor import ChunkedProcessor
from trl_env.presets import PRESETS


def add_rollout_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``eval`` and ``train``: env, model, seeds, budgets, processor.

    Example:
        >>> parser = argparse.ArgumentParser(); add_rollout_arguments(parser)
        >>> parser.parse_args(["--env", "m:F", "--model", "x"]).max_turns
        8
    """
    parser.add_argument("--env", required=True, help="environment factory as MODULE:FACTORY (importable from cwd)")
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of keyword arguments for the factory")
    parser.add_argument("--model", required=True, help="local model directory (weights and tokenizer)")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", help="comma-separated seeds")
    seeds.add_argument("--seeds-file", help="file with one seed per line")
    parser.add_argument("--max-turns", type=int, default=8, help="model turns per episode (default 8)")
    parser.add_argument("--max-turn-tokens", type=int, default=256, help="sampled tokens per turn (default 256)")
    parser.add_argument("--max-completion-tokens", type=int, default=1024,
                        help="completion tokens per episode, env tokens included (default 1024)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, > 0 (default 1.0)")
    parser.add_argument("--system-prompt", default="", help="system prompt (default: none)")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="use a preset processor instead of the chat template")
    thinking = parser.add_mutually_exclusive_group()
    thinking.add_argument("--thinking", dest="thinking", action="store_true", default=None)
    thinking.add_argument("--no-thinking", dest="thinking", action="store_false")
    parser.add_argument("--answer-prefix", default="",
                        help="text that opens every assistant turn, e.g. 'My guess:' (prefilled, not sampled)")
    parser.add_argument("--bf16", action="store_true", help="sample (and train) under bfloat16 autocast")
    parser.add_argument("--seed", type=int, default=0, help="torch random seed for sampling (default 0)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``eval`` subcommand."""
    parser = subparsers.add_parser("eval", help="evaluate a model on an environment with sampled episodes")
    add_rollout_arguments(parser)
    parser.add_argument("--episodes", type=int, default=None, help="number of episodes (default: all seeds, or 64)")
    parser.add_argument("--batch-size", type=int, default=64, help="episodes per batch (default 64)")
    parser.add_argument("--out", help="write one JSON line per episode to this file")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    parser.set_defaults(run=run)


def with_answer_prefix(processor: ChunkedProcessor, prefix: str) -> ChunkedProcessor:
    """A copy of ``processor`` whose generation prompt ends with ``prefix``: every model turn starts with it.

    The prefix is part of the environment's chunk (mask 0, not trained on); the model
    continues it. The parsed action is what the model wrote after the prefix.

    Example:
        >>> from trl_env.presets import preset
        >>> with_answer_prefix(preset("qwen3_nothink"), "My guess:").append_user_input("Hi").endswith("My guess:")
        True
    """
    if not prefix:
        return processor
    chunks = dataclasses.replace(processor.chunks, user_suffix=processor.chunks.user_suffix + prefix)
    return ChunkedProcessor(chunks, think_markers=processor.think_markers, name=f"{processor.name}+prefix")


def build_processor(args: argparse.Namespace, tokenizer: object) -> ChunkedProcessor:
    """The processor the arguments ask for: a preset or the tokenizer's chat template, plus ``--answer-prefix``.

    Example:
        >>> ns = argparse.Namespace(preset="qwen3_nothink", thinking=None, answer_prefix="")
        >>> build_processor(ns, None).name
        'qwen3_nothink'
    """
    from trl_env.chat_template_processor import ChatTemplateProcessor
    from trl_env.presets import preset

    processor = preset(args.preset) if args.preset else ChatTemplateProcessor(tokenizer, thinking=args.thinking)
    return with_answer_prefix(processor, getattr(args, "answer_prefix", ""))


def run(args: argparse.Namespace) -> int:
    """Load the model, play the episodes, print the summary and write the JSONL file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_env.evaluation import evaluate, load_factory, read_seeds

    factory = load_factory(args.env, json.loads(args.env_kwargs))
    seeds = read_seeds(args.seeds, args.seeds_file, args.episodes)
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    summary = evaluate(
        factory, model, tokenizer, seeds,
        processor=build_processor(args, tokenizer),
        temperature=args.temperature,
        batch_size=args.batch_size,
        progress=args.progress,
        autocast_dtype=torch.bfloat16 if args.bf16 else None,
        system_prompt=args.system_prompt,
        max_turns=args.max_turns,
        max_turn_tokens=args.max_turn_tokens,
        max_completion_tokens=args.max_completion_tokens,
    )
    if args.out:
        summary.write_jsonl(args.out)
    print(json.dumps(summary.metrics()) if args.json else summary.format())
    if args.out and not args.json:
        print(f"wrote {summary.episodes} episodes to {args.out}")
    return 0
