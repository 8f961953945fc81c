"""Arguments shared by the ``trl-env`` subcommands, and the errors they report.

The rollout flags (``--max-turns``, ``--env-timeout``, ...) are generated from
:class:`~trl_env.engine.config.RolloutConfig`'s fields, so their names, types, defaults and help
are written once, in the config. Mistakes a user makes on the command line (a bad ``MODULE:FACTORY``,
bad JSON, a missing model directory) raise :class:`UsageError`: one clear line and exit status 2.

Example:
    >>> parser = argparse.ArgumentParser(); add_config_arguments(parser)
    >>> config_from_args(parser.parse_args(["--max-turns", "3", "--env-timeout", "none"]))
    RolloutConfig(system_prompt='', max_turns=3, ..., env_timeout=None, ...)
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pkgutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trl_env.cli.factory_kwargs import check_factory_kwargs
from trl_env.cli.usage import UsageError
from trl_env.engine.config import RolloutConfig

# RolloutConfig fields with no flag: trl-env train takes the episode budget from its own settings
_NOT_FLAGS = {"check_invariants", "reuse_envs"}


def _optional(kind: type) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return None if text.lower() in ("none", "") else kind(text)

    parse.__name__ = kind.__name__  # argparse names the type in its error message
    return parse


_FLAG_TYPES = {
    "int": int,
    "float": float,
    "str": str,
    "int | None": _optional(int),
    "float | None": _optional(float),
    "str | None": _optional(str),
}


def describe_default(value: Any) -> str:
    """How a flag's help shows its default: ``(default 8)``, ``(default none)``, ``(default empty)``.

    Example:
        >>> describe_default(8), describe_default(None), describe_default("")
        ('(default 8)', '(default none)', '(default empty)')
    """
    if value is None:
        return "(default none)"
    return "(default empty)" if value == "" else f"(default {value})"


def add_config_arguments(parser: argparse.ArgumentParser, defaults: dict[str, Any] | None = None) -> None:
    """One ``--flag`` per :class:`RolloutConfig` field, with its default and help text.

    Args:
        parser: the subcommand's parser.
        defaults: field -> the subcommand's own default where it differs from the config's.
    """
    group = parser.add_argument_group("rollout (RolloutConfig)")
    for f in dataclasses.fields(RolloutConfig):
        if f.name in _NOT_FLAGS:
            continue
        default = (defaults or {}).get(f.name, f.default)
        # A field with choices is a Literal of strings; the others are plain numbers or text.
        kind = str if "choices" in f.metadata else f.metadata.get("parse") or _FLAG_TYPES[str(f.type)]
        group.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f.name,
            type=kind,
            default=default,
            choices=f.metadata.get("choices"),
            help=f"{f.metadata['help']} {describe_default(default)}",
        )


def config_from_args(args: argparse.Namespace) -> RolloutConfig:
    """The :class:`RolloutConfig` the flags describe; an invalid value is a :class:`UsageError`."""
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(RolloutConfig) if f.name not in _NOT_FLAGS}
    try:
        return RolloutConfig(**values)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None


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


def model_directory(path: str) -> str:
    """``path`` if it is a local model directory; a :class:`UsageError` otherwise.

    Example:
        >>> model_directory("/nonexistent/model")
        Traceback (most recent call last):
        ...
        trl_env.cli.usage.UsageError: model directory '/nonexistent/model' does not exist
    """
    folder = Path(path)
    if not folder.is_dir():
        raise UsageError(f"model directory {path!r} does not exist")
    if not (folder / "config.json").is_file():
        raise UsageError(f"{path!r} has no config.json: not a transformers model directory")
    return path


def read_seeds(
    seeds: str | None = None,
    seeds_file: str | Path | None = None,
    episodes: int | None = None,
    default_prefix: str = "eval-",
) -> list[str]:
    """Seed list from a comma-separated string or a file (one per line), cycled or cut to ``episodes``.

    Without either, the seeds are ``eval-0 .. eval-{episodes-1}``.

    Example:
        >>> read_seeds("a,b", episodes=3)
        ['a', 'b', 'a']
        >>> read_seeds(episodes=2)
        ['eval-0', 'eval-1']
    """
    if seeds is not None and seeds_file is not None:
        raise UsageError("give seeds or a seeds file, not both")
    if seeds is not None:
        listed = [s.strip() for s in seeds.split(",") if s.strip()]
    elif seeds_file is not None:
        try:
            text = Path(seeds_file).read_text(encoding="utf-8")
        except OSError as error:
            raise UsageError(f"cannot read the seeds file: {error}") from None
        listed = [line.strip() for line in text.splitlines() if line.strip()]
    else:
        return [f"{default_prefix}{i}" for i in range(episodes if episodes is not None else 64)]
    if not listed:
        raise UsageError("the seed list is empty")
    if episodes is None:
        return listed
    return [listed[i % len(listed)] for i in range(episodes)]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Model, seeds, sampling and processor arguments shared by ``eval`` and ``train``."""
    parser.add_argument("--model", required=True, help="local model directory (weights and tokenizer)")
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", help="comma-separated seeds")
    seeds.add_argument("--seeds-file", help="file with one seed per line")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature, > 0 (default 1.0)")
    add_processor_arguments(parser)
    parser.add_argument(
        "--answer-prefix",
        default="",
        help="text that opens every assistant turn, e.g. 'My guess:' (prefilled, not sampled)",
    )
    parser.add_argument("--bf16", action="store_true", help="sample (and train) under bfloat16 autocast")
    parser.add_argument("--seed", type=int, default=0, help="torch random seed for sampling (default 0)")


def add_processor_arguments(parser: argparse.ArgumentParser) -> None:
    """``--preset`` and ``--thinking/--no-thinking``."""
    from trl_env.chat.presets import PRESETS

    parser.add_argument("--preset", choices=sorted(PRESETS), help="use a preset processor instead of the chat template")
    thinking = parser.add_mutually_exclusive_group()
    thinking.add_argument(
        "--thinking",
        dest="thinking",
        action="store_true",
        default=None,
        help="pass enable_thinking=True to the chat template",
    )
    thinking.add_argument(
        "--no-thinking", dest="thinking", action="store_false", help="pass enable_thinking=False to the chat template"
    )


def build_processor(args: argparse.Namespace, tokenizer: Any) -> Any:
    """The processor the arguments ask for: a preset or the tokenizer's chat template, plus ``--answer-prefix``.

    Example:
        >>> build_processor(argparse.Namespace(preset="qwen3_nothink", thinking=None, answer_prefix=""), None).name
        'qwen3_nothink'
    """
    from trl_env.chat.chunked_processor import with_answer_prefix
    from trl_env.chat.presets import preset
    from trl_env.chat.template_processor import ChatTemplateProcessor, ChunkingError

    try:
        per_turn = getattr(args, "history", "full") != "full"  # the template renders every prompt (any template)
        processor = (
            preset(args.preset)
            if args.preset
            else ChatTemplateProcessor(tokenizer, thinking=args.thinking, per_turn=per_turn)
        )
    except (ChunkingError, ValueError) as error:
        raise UsageError(f"cannot build a processor: {error}") from None
    return with_answer_prefix(processor, args.answer_prefix)


def load_model(path: str, *, train: bool = False) -> tuple[Any, Any]:
    """Tokenizer and float32 model from a local directory (checked first)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_directory(path)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return tokenizer, model if train else model.eval()
