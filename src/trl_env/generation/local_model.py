"""Sampling settings for a local transformers model: its stop tokens and optional bf16 autocast.

Example:
    >>> autocast_context(None, None) is None
    True
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from trl_env.chat.turn_end import TurnEnd
from trl_env.core import Processor


def autocast_context(model: Any, dtype: torch.dtype | None) -> Callable[[], Any] | None:
    """A ``model_context`` for :class:`~trl_env.TransformersGenerator` that samples under ``torch.autocast(dtype)``.

    Args:
        model: the model to sample from.
        dtype: e.g. ``torch.bfloat16``; None for plain precision.

    Returns:
        A context-manager factory yielding ``model``, or None when ``dtype`` is None.
    """
    if dtype is None:
        return None

    @contextlib.contextmanager
    def context() -> Iterator[Any]:
        device_type = next(model.parameters()).device.type
        with torch.autocast(device_type, dtype=dtype):
            yield model

    return context


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX), where bf16 autocast is ~2x faster.

    Example:
        >>> isinstance(cpu_has_bf16(), bool)
        True
    """
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def stop_token_ids(model: Any, tokenizer: Any, processor: Processor) -> list[int]:
    """The ids a generator on ``model`` stops at: the model's EOS ids plus the processor's end-of-turn token.

    Args:
        model: a model whose ``generation_config.eos_token_id`` is read.
        tokenizer: its tokenizer.
        processor: a :class:`~trl_env.core.TurnDelimited` processor.

    Returns:
        :meth:`TurnEnd.stop_token_ids <trl_env.chat.turn_end.TurnEnd.stop_token_ids>` of the model's EOS ids.

    Example:
        >>> from trl_env.chat.presets import preset
        >>> stop_token_ids(model, tokenizer, preset("qwen3_thinking"))
        [151645]
    """
    return TurnEnd.of(processor, tokenizer).stop_token_ids(model.generation_config.eos_token_id)
