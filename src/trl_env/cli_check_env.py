"""``trl-env check-env MODULE:FACTORY``: run :func:`trl_env.env_checker.check_env` and print the table.

Exits 0 when every check passes, 1 otherwise.

Example:
    >>> main(["check-env", "examples.guess_number:GuessNumberEnv"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse

from trl_env.env_checker import DEFAULT_SEEDS, check_env
from trl_env.imports import import_object


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``check-env`` subcommand."""
    parser = subparsers.add_parser("check-env", help="check an environment against the Env protocol")
    parser.add_argument("factory", help="MODULE:FACTORY, e.g. examples.guess_number:GuessNumberEnv")
    parser.add_argument("--seeds", default=",".join(DEFAULT_SEEDS), help="comma-separated seeds")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Import the factory, check it, print the report; return the exit status."""
    report = check_env(import_object(args.factory), seeds=args.seeds.split(","))
    print(report.table())
    return 0 if report.ok else 1
