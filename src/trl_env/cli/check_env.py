"""``trl-env check-env MODULE:FACTORY``: run :func:`trl_env.checks.env.check_env` and print the table.

Exits 0 when every check passes, 1 when one fails or a call hangs (the checks stop at the first call
that takes longer than ``--timeout`` seconds, default 10, and name it), 2 on a command-line mistake.

Example:
    >>> main(["check-env", "examples.guess_number:GuessNumberEnv"])
    check-env GuessNumberEnv: all ... checks passed
    ...
    0
"""

from __future__ import annotations

import argparse

from trl_env.cli.arguments import UsageError
from trl_env.cli.env_factory import add_env_arguments, load_factory

DEFAULT_SEEDS = "0,1,seed-a,7"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``check-env`` subcommand."""
    parser = subparsers.add_parser(
        "check-env",
        help="check an environment against the Env protocol",
        description="Check an environment against the Env protocol.",
    )
    add_env_arguments(parser, positional=True)
    parser.add_argument("--seeds", default=DEFAULT_SEEDS, help=f"comma-separated seeds (default {DEFAULT_SEEDS})")
    parser.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds one reset/step may take; the first call past it stops the checks as a hang (default 10)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Import the factory, check it, print the report; return the exit status."""
    from trl_env.checks.env import check_env

    if not 0 < args.timeout < float("inf"):
        raise UsageError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    report = check_env(load_factory(args.env, args.env_kwargs), seeds=args.seeds.split(","), timeout=args.timeout)
    print(report.table())
    return 0 if report.ok else 1
