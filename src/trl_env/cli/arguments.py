"""Arguments shared by the ``trl-env`` subcommands, and the errors they report.

The rollout flags (``--max-turns``, ``--env-timeout``, ...) are generated from
:class:`~trl_env.engine.config.RolloutConfig`'s fields, so their names, types, defaults and help
are written once, in the config (the env flags are :mod:`trl_env.cli.env_factory`). Mistakes a user makes on the
command line (a bad ``MODULE:FACTORY``, bad JSON, a missing model directory) raise :class:`UsageError`: one clear
line and exit status 2.

Example:
    >>> parser = argparse.ArgumentParser(); add_config_arguments(parser)
    >>> config_from_args(parser.parse_args(["--max-turns", "3", "--env-timeout", "none"]))
    RolloutConfig(system_prompt='', max_turns=3, ..., env_timeout=None, ...)
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
