"""``--env MODULE:FACTORY`` / ``--agent MODULE:FUNC`` and ``--env-kwargs``: the env factory a command plays.

Example:
    >>> parser = argparse.ArgumentParser(); add_env_arguments(parser)
    >>> parser.parse_args(["--env", "examples.guess_number:GuessNumberEnv"]).agent is None
    True
"""

from __future__ import annotations

import argparse
import functools
import json
import pkgutil
import sys
from collections.abc import Callable
from typing import Any

from trl_env.cli.factory_kwargs import check_factory_kwargs
from trl_env.cli.usage import UsageError


def add_env_arguments(parser: argparse.ArgumentParser, *, positional: bool = False) -> None:
    """``--env MODULE:FACTORY`` or ``--agent MODULE:FUNC`` (or a positional ``factory``), and ``--env-kwargs JSON``."""
    help_text = "environment factory as MODULE:FACTORY (importable from the current directory)"
    if positional:
        parser.add_argument("env", metavar="MODULE:FACTORY", help=help_text)
    else:
        chosen = parser.add_mutually_exclusive_group(required=True)
        chosen.add_argument("--env", help=help_text)
        chosen.add_argument(
            "--agent",
            metavar="MODULE:FUNC",
            help="an agent program agent(endpoint, task) -> reward calling the model over the OpenAI API, trained "
            "as an env (trl_env.agents.agent_env; --env-kwargs go to agent_env, e.g. '{\"max_turns\": 4}')",
        )
    parser.add_argument("--env-kwargs", default="{}", help="JSON object of keyword arguments for the factory")


def env_factory_from_args(args: argparse.Namespace) -> Callable[[], Any]:
    """The env factory of ``--env`` or ``--agent`` (with ``--env-kwargs``); a bad one is a :class:`UsageError`.

    Example:
        >>> parser = argparse.ArgumentParser(); add_env_arguments(parser)
        >>> factory = env_factory_from_args(parser.parse_args(["--agent", "examples.agent_calculator:solve"]))
        >>> type(factory()).__name__
        'AgentEnv'
    """
    if getattr(args, "agent", None) is None:
        return load_factory(args.env, args.env_kwargs)
    if ":" not in args.agent:
        raise UsageError(
            f"expected the agent as MODULE:FUNC (e.g. examples.agent_calculator:solve), got {args.agent!r}"
        )
    from trl_env.agents.agent_env import agent_env

    kwargs = json_object(args.env_kwargs)
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as with python -m
    check_factory_kwargs(agent_env, {"agent": args.agent, **kwargs}, "trl_env.agents:agent_env")
    try:
        return agent_env(args.agent, **kwargs)
    except (ImportError, AttributeError, ValueError) as error:
        raise UsageError(f"cannot import the agent {args.agent!r}: {type(error).__name__}: {error}") from None


def json_object(text: str) -> dict[str, Any]:
    """``--env-kwargs``: a JSON object, or a :class:`UsageError`."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise UsageError(f"--env-kwargs is not valid JSON ({error}): {text!r}") from None
    if not isinstance(value, dict):
        raise UsageError(f"--env-kwargs must be a JSON object like '{{\"high\": 8}}', got {text!r}")
    return value


def load_factory(spec: str, kwargs_json: str = "{}") -> Callable[[], Any]:
    """Import ``"module:Factory"`` (the current directory is importable) and bind the JSON keyword arguments.

    Args:
        spec: ``MODULE:NAME`` (``NAME`` may be dotted).
        kwargs_json: a JSON object of keyword arguments.

    Returns:
        A zero-argument env factory.

    Example:
        >>> load_factory("examples.guess_number:GuessNumberEnv", '{"high": 8}')().high
        8
        >>> env = load_factory("trl_env.adapters.reasoning_gym:reasoning_gym_env", '{"dataset": "leg_counting"}')()
        >>> type(env).__name__
        'ReasoningGymEnv'
        >>> load_factory("examples.guess_number:Nope")
        Traceback (most recent call last):
        ...
        trl_env.cli.usage.UsageError: cannot import the env factory 'examples.guess_number:Nope': ...
    """
    if ":" not in spec or spec.startswith(":") or spec.endswith(":"):
        raise UsageError(
            f"expected the env factory as MODULE:FACTORY (e.g. examples.guess_number:GuessNumberEnv), got {spec!r}"
        )
    kwargs = json_object(kwargs_json)
    if "" not in sys.path:
        sys.path.insert(0, "")  # the current directory, as with python -m
    try:
        factory = pkgutil.resolve_name(spec)
    except (ImportError, AttributeError, ValueError) as error:
        raise UsageError(f"cannot import the env factory {spec!r}: {type(error).__name__}: {error}") from None
    if not callable(factory):
        raise UsageError(f"the env factory {spec!r} is a {type(factory).__name__}, not a class or function")
    check_factory_kwargs(factory, kwargs, spec)  # a class is first called in a worker, at the first episode
    if isinstance(factory, type):
        return functools.partial(factory, **kwargs) if kwargs else factory
    # A function is either an env factory (returns an env) or an adapter (returns a factory, e.g.
    # trl_env.adapters.textarena:textarena_env): call it once with the kwargs to tell which.
    try:
        made = factory(**kwargs)
    except Exception as error:
        raise UsageError(f"{spec}(**{kwargs_json}) raised {type(error).__name__}: {error}") from None
    if callable(getattr(made, "reset", None)) and callable(getattr(made, "step", None)):
        return functools.partial(factory, **kwargs) if kwargs else factory
    if callable(made):
        return made
    raise UsageError(f"{spec} returned {type(made).__name__}: neither an env (reset/step) nor an env factory")
