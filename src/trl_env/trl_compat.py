"""Every use of TRL internals in one place, behind a version check.

trl-env targets TRL 1.16's ``rollout_func`` API. The members read here are not public API
and may move in another release; :func:`require_supported_trl` fails early and clearly.

Example:
    >>> require_supported_trl()  # raises on an unsupported TRL
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import trl
from packaging.version import Version

SUPPORTED_TRL = (Version("1.16.0"), Version("1.17.0"))


def require_supported_trl(version: str | None = None) -> None:
    """Raise ``RuntimeError`` unless TRL is in the supported range (1.16.x).

    Example:
        >>> require_supported_trl("1.16.0")  # doctest: +ELLIPSIS
        >>> require_supported_trl("0.19.0")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        RuntimeError: trl-env needs trl>=1.16.0,<1.17.0 for rollout_func support; found trl 0.19.0 ...
    """
    found = Version(version or trl.__version__)
    low, high = SUPPORTED_TRL
    if not (low <= found < high):
        raise RuntimeError(
            f"trl-env needs trl>={low},<{high} for rollout_func support; found trl {found} "
            "(pip install 'trl==1.16.*')"
        )


def trainer_tokenizer(trainer: Any) -> Any:
    """The text tokenizer of a GRPOTrainer (the inner tokenizer of a VLM processor)."""
    processing_class = trainer.processing_class
    return getattr(processing_class, "tokenizer", processing_class)


def model_for_generation(trainer: Any) -> Callable[[], AbstractContextManager[Any]]:
    """A context-manager factory yielding the trainer's model unwrapped for ``generate``."""
    from trl.models import unwrap_model_for_generation

    def context() -> AbstractContextManager[Any]:
        return unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
        )

    return context


def log_metric(trainer: Any, name: str, value: float) -> None:
    """Append ``value`` to the metric ``name`` that TRL averages and logs at each logging step."""
    mode = "train" if trainer.model.training else "eval"
    trainer._metrics[mode][name].append(float(value))


def vllm_generation(trainer: Any) -> Any:
    """The trainer's vLLM generation handle (``use_vllm=True`` only)."""
    handle = getattr(trainer, "vllm_generation", None)
    if handle is None:
        raise RuntimeError("trainer.use_vllm is True but the trainer has no vllm_generation handle (TRL 1.16 API)")
    return handle
