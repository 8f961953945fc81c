"""The ``trl-env`` console command; each subcommand lives in its own ``cli_*`` module.

Example:
    >>> main(["--help"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from trl_env import cli_check, cli_check_env, cli_eval, cli_train

SUBCOMMANDS = [cli_check, cli_check_env, cli_eval, cli_train]


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``trl-env``; returns the exit status.

    Example:
        >>> main(["check", "path/to/model"])  # doctest: +SKIP
        0
    """
    parser = argparse.ArgumentParser(prog="trl-env", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        module.register(subparsers)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
