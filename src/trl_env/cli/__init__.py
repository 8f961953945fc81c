"""The ``trl-env`` console command; each subcommand lives in its own module of this package.

Subcommand modules import torch and transformers only when they run, so ``trl-env --help`` is fast.
A command-line mistake (:class:`~trl_env.cli.arguments.UsageError`) prints one line and exits 2.

Example:
    >>> main(["check-env", "examples.guess_number:Nope"])  # prints the error on stderr
    2
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from trl_env.cli import check, check_env, eval, train, view
from trl_env.cli.arguments import UsageError

SUBCOMMANDS = [check, check_env, eval, train, view]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``trl-env``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="trl-env", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UsageError as error:
        print(f"trl-env: error: {error}", file=sys.stderr)
        return 2
