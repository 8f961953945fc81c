"""``trl-env check MODEL_OR_DIR``: print the additivity report of a tokenizer's processor.

Exits 0 when every case is additive, 1 when some are not, 2 when no processor can be
built (the template cannot be chunked).

Example:
    >>> main(["check", "./my-model", "--no-thinking"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse

from trl_env.additivity import check_additivity
from trl_env.chat_template_processor import ChatTemplateProcessor, ChunkingError
from trl_env.presets import PRESETS, preset


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``check`` subcommand."""
    parser = subparsers.add_parser("check", help="check that a tokenizer's chat chunks are additive")
    parser.add_argument("model", help="a local model or tokenizer directory (or a hub name already cached)")
    thinking = parser.add_mutually_exclusive_group()
    thinking.add_argument("--thinking", dest="thinking", action="store_true", default=None)
    thinking.add_argument("--no-thinking", dest="thinking", action="store_false")
    parser.add_argument("--preset", choices=sorted(PRESETS), help="check a preset instead of the chat template")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load the tokenizer, build the processor, print the report; return the exit status."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    try:
        processor = preset(args.preset) if args.preset else ChatTemplateProcessor(tokenizer, thinking=args.thinking)
    except (ChunkingError, ValueError) as error:
        print(f"cannot build a processor for {args.model}: {error}")
        return 2
    report = check_additivity(tokenizer, processor)
    print(report.table())
    return 0 if report.ok else 1
