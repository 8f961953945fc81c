"""The generator a ``GRPOTrainer`` samples episodes with, built in one place from the trainer's own settings.

:func:`~trl_env.trainer.rollout_func.make_rollout_func` (and so :func:`~trl_env.trainer.recipe.build_trainer`,
``trl-env train`` and the demo) samples through :func:`trainer_generator` unless it is given a generator:

* with ``GRPOConfig(use_vllm=True)``, the trainer's vLLM
  (:class:`~trl_env.generation.trainer_vllm.TrainerVLLMGenerator`), which TRL configures from the same settings;
* otherwise an :class:`~trl_env.generation.kv_cache.EpisodeCacheGenerator` on the trainer's model, with every
  sampling setting of its ``GRPOConfig`` (:class:`SamplingSettings`), under TRL's unwrap for generation. The
  model then runs as the trainer prepared it: with ``bf16=True`` accelerate has wrapped its forward in bfloat16
  autocast (on CPU too), so episodes are sampled at the precision the policy trains at, and in float32 otherwise.

Stop ids: the trainer's EOS ids, which must hold the processor's end-of-turn token (:func:`trainer_stop_token_ids`).

Example:
    >>> from trl import GRPOConfig
    >>> SamplingSettings.of(GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, temperature=0.7, top_k=20))
    SamplingSettings(temperature=0.7, top_p=1.0, top_k=20, min_p=None, repetition_penalty=1.0)
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trl_env.chat.turn_end import TurnEnd
from trl_env.core import Generator
from trl_env.errors import ConfigError
from trl_env.generation.kv_cache import EpisodeCacheGenerator
from trl_env.generation.local_model import autocast_context
from trl_env.generation.trainer_vllm import TrainerVLLMGenerator
from trl_env.trainer.trl_compat import model_for_generation, uses_vllm


@dataclass(frozen=True)
class SamplingSettings:
    """The sampling settings of a ``GRPOConfig`` (TRL 1.15/1.16), as trl-env's transformers generators take them.

    ``top_k=None`` means no top-k (``GRPOConfig``'s 0).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float = 1.0

    @classmethod
    def of(cls, args: Any) -> SamplingSettings:
        """Read them from a ``GRPOConfig``.

        Args:
            args: the trainer's ``GRPOConfig`` (``trainer.args``).
        """
        return cls(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k or None,
            min_p=args.min_p,
            repetition_penalty=args.repetition_penalty,
        )

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`~trl_env.generation.transformers_generator.TransformersGenerator`.

        Example:
            >>> SamplingSettings(top_k=5).as_kwargs()["top_k"]
            5
        """
        return dataclasses.asdict(self)


def trainer_stop_token_ids(trainer: Any, ending: TurnEnd) -> list[int]:
    """The ids a trainer's generator stops at: the trainer's EOS ids, which must include the end-of-turn token.

    TRL counts a sample whose last token is not one of its EOS ids as truncated; every finished episode ends
    with the end-of-turn token, so it must be among them.

    Args:
        trainer: a ``GRPOTrainer``.
        ending: the processor's end of turn.

    Returns:
        ``trainer.eos_token_ids`` (in their order).

    Raises:
        ConfigError: the end-of-turn token is not among them.
    """
    eos = [int(t) for t in trainer.eos_token_ids]
    if ending.id not in eos:
        raise ConfigError(
            f"the end-of-turn token {ending.text!r} (id {ending.id}) is not among the trainer's EOS "
            f"ids {trainer.eos_token_ids}; TRL would count every episode as truncated. Set "
            "model.generation_config.eos_token_id to include it."
        )
    return ending.stop_token_ids(eos)


def trainer_generator(trainer: Any, tokenizer: Any, stop_token_ids: list[int]) -> Generator:
    """The generator that samples a trainer's episodes: its vLLM, or its model with its ``GRPOConfig`` settings.

    Args:
        trainer: a ``GRPOTrainer``.
        tokenizer: its text tokenizer.
        stop_token_ids: from :func:`trainer_stop_token_ids`.

    Returns:
        A :class:`~trl_env.generation.trainer_vllm.TrainerVLLMGenerator` (``use_vllm=True``) or an
        :class:`~trl_env.generation.kv_cache.EpisodeCacheGenerator`.
    """
    if uses_vllm(trainer):
        return TrainerVLLMGenerator(trainer, stop_token_ids=stop_token_ids)
    return EpisodeCacheGenerator(
        trainer.model,
        tokenizer,
        **SamplingSettings.of(trainer.args).as_kwargs(),
        stop_token_ids=stop_token_ids,
        model_context=model_for_generation(trainer),
    )


def snapshot_generator(trainer: Any, model: Any, tokenizer: Any, stop_token_ids: list[int]) -> Generator:
    """The generator of pipelined rollouts: an :class:`EpisodeCacheGenerator` on a policy snapshot.

    Same sampling settings as :func:`trainer_generator`; under ``bf16=True`` the snapshot samples in bfloat16
    autocast, as the trainer's prepared model does.

    Args:
        trainer: a ``GRPOTrainer``.
        model: the snapshot's model (:class:`~trl_env.trainer.policy_snapshot.PolicySnapshot`).
        tokenizer: its text tokenizer.
        stop_token_ids: from :func:`trainer_stop_token_ids`.
    """
    import torch

    return EpisodeCacheGenerator(
        model,
        tokenizer,
        **SamplingSettings.of(trainer.args).as_kwargs(),
        stop_token_ids=stop_token_ids,
        model_context=autocast_context(model, torch.bfloat16 if trainer.args.bf16 else None),
    )
