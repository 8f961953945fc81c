"""The ``trl-env`` console command; each subcommand lives in its own module of this package.

Subcommand modules import torch and transformers only when they run, so ``trl-env --help`` is fast.
Exit codes (see ``docs/cli.md``): 0 the command worked; 1 it ran but failed (eval episodes failed in their
env, training stopped on env failures, a check failed); 2 a command-line mistake
(:class:`~trl_env.cli.usage.UsageError`, one line); 3 the env broke the Env protocol (one line naming
the class, the method, the seed and the fix).

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
from trl_env.cli.quiet import silence_known_warnings

SUBCOMMANDS = [check, check_env, eval, train, view]
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENV_CONTRACT = 0, 1, 2, 3

DESCRIPTION = "Evaluate, train (GRPO with TRL) and check LLM agents on multi-turn text environments."
EPILOG = """exit codes:
  0  the command worked
  1  it ran but failed: eval episodes failed in their env (all, or more than --max-failure-rate),
     training stopped on env failures, an env failed under --on-env-error raise, check or check-env
     found a problem
  2  a command-line mistake (bad MODULE:FACTORY, --env-kwargs that do not fit, a missing model, ...)
  3  the env broke the Env protocol (e.g. reset returned None); trl-env check-env finds the same

run 'trl-env COMMAND --help' for a command's options"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``trl-env``; returns the exit status.

    Args:
        argv: the arguments after ``trl-env`` (default: ``sys.argv[1:]``).

    Returns:
        The exit status: 0 ok, 1 the run failed, 2 a usage error, 3 an env contract error.
    """
    silence_known_warnings()
    parser = argparse.ArgumentParser(
        prog="trl-env", description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in SUBCOMMANDS:
        module.register(subparsers)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except UsageError as error:
        print(f"trl-env: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as error:
        from trl_env.engine.fault_policy import EnvContractError, EnvError

        if (contract := _behind(error, EnvContractError)) is not None:
            print(_contract_line(contract, getattr(args, "env", "MODULE:FACTORY")), file=sys.stderr)
            return EXIT_ENV_CONTRACT
        if (failed := _behind(error, EnvError)) is not None:  # --on-env-error raise: the first failure stops
            print(f"trl-env: the env failed (--on-env-error raise): {' '.join(str(failed).split())}", file=sys.stderr)
            return EXIT_FAILED
        raise


def _behind(error: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The exception of type ``kind`` that is ``error`` or one of its causes, if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, kind):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _contract_line(error: BaseException, spec: str) -> str:
    """One line: what the env did (class, method, seed: from the error), the protocol, how to check it.

    Example:
        >>> print(_contract_line(TypeError("Bad.reset(seed='0') returned NoneType, expected a tuple (env, delta)"),
        ...                      "my_envs:Bad"))  # doctest: +NORMALIZE_WHITESPACE
        trl-env: the env broke the Env protocol: Bad.reset(seed='0') returned NoneType, expected a tuple
        (env, delta); fix: reset(seed) and step(action) return (env, delta) with delta a str, env.reward a float
        and env.alive a bool; run `trl-env check-env my_envs:Bad` to check every call
    """
    what = " ".join(str(error).split())
    return (
        f"trl-env: the env broke the Env protocol: {what}; fix: reset(seed) and step(action) return (env, delta) "
        f"with delta a str, env.reward a float and env.alive a bool; run `trl-env check-env {spec}` to check every call"
    )
