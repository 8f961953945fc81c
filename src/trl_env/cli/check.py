"""``trl-env check MODEL_OR_DIR``: print the additivity report of a tokenizer's processor.

Exits 0 when every case is additive and the rendering matches the template, 1 when not, 2 when
no processor can be built (the template cannot be chunked).

Example:
    >>> main(["check", "./my-model", "--no-thinking"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse

from trl_env.cli.arguments import add_processor_arguments, build_processor


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``check`` subcommand."""
    parser = subparsers.add_parser(
        "check",
        help="check that a tokenizer's chat chunks are additive",
        description="Check that a tokenizer's chat chunks are additive.",
    )
    parser.add_argument("model", help="a local model or tokenizer directory (or a hub name already cached)")
    add_processor_arguments(parser)
    parser.set_defaults(run=run, answer_prefix="")


def run(args: argparse.Namespace) -> int:
    """Load the tokenizer, build the processor, print the report; return the exit status."""
    from transformers import AutoTokenizer

    from trl_env.checks.additivity import check_additivity

    tokenizer = AutoTokenizer.from_pretrained(args.model)
    report = check_additivity(tokenizer, build_processor(args, tokenizer))
    print(report.table())
    return 0 if report.ok else 1
