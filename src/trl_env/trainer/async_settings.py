"""What :class:`~trl_env.trainer.async_worker.EnvRolloutWorker` is built from, checked before its thread starts.

:func:`worker_config` builds the worker's :class:`~trl_env.engine.config.RolloutConfig` and refuses what the worker
or TRL's ``AsyncGRPOTrainer`` cannot run (a tree rollout, ``max_turn_samples``, a ``lora_name`` with no model name
to set); :func:`worker_processor` gives the chat format, checked like every rollout's.

Example:
    >>> worker_config(None, {"max_turns": 3}, object(), num_generations=2, groups_per_batch=1).max_turns
    3
    >>> worker_config(None, {}, object(), num_generations=2, groups_per_batch=1, max_staleness=-1)
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigError: max_staleness must be >= 0 or None, got -1
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trl_env.chat.template_processor import ChatTemplateProcessor
from trl_env.chat.turn_end import require_turn_delimited
from trl_env.checks.additivity import check_additivity
from trl_env.core import Generator, Processor
from trl_env.engine.config import RolloutConfig
from trl_env.errors import ConfigError, TemplateError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


def worker_config(
    config: RolloutConfig | None,
    settings: dict[str, Any],
    generator: Generator,
    *,
    num_generations: int,
    groups_per_batch: int,
    max_staleness: int | None = None,
    lora_name: str | None = None,
) -> RolloutConfig:
    """``config`` with ``settings`` (:class:`RolloutConfig` fields) applied, once the worker's settings are checked.

    Args:
        config: the rollout's budgets and policies (None: the defaults).
        settings: :class:`RolloutConfig` fields that override ``config``.
        generator: the sampling backend (it must have a ``model`` name when ``lora_name`` is set).
        num_generations: episodes per seed (the GRPO group), at least 1.
        groups_per_batch: groups played together in one engine run, at least 1.
        max_staleness: the batch staleness the worker drops (None, or at least 0).
        lora_name: the adapter name the trainer publishes (None: full weight sync).

    Raises:
        ConfigError: a group or batch size below 1, a negative ``max_staleness``, a ``lora_name`` for a generator with
            no ``model``, a tree rollout, or ``max_turn_samples`` under a per-turn ``history``.
    """
    if num_generations < 1 or groups_per_batch < 1:
        raise ConfigError(
            f"num_generations and groups_per_batch must be >= 1, got {num_generations}, {groups_per_batch}"
        )
    if max_staleness is not None and max_staleness < 0:
        raise ConfigError(f"max_staleness must be >= 0 or None, got {max_staleness}")
    if lora_name is not None and not hasattr(generator, "model"):
        raise ConfigError(
            f"lora_name needs a generator with a `model` name to set; {type(generator).__name__} has none"
        )
    rollout_config = RolloutConfig.from_kwargs(config, **settings)
    if rollout_config.tree is not None:  # a tree's leaves are not one group per seed; TRL has no tree advantage
        raise ConfigError("EnvRolloutWorker plays plain episodes; tree rollouts need TurnLevelGRPOTrainer")
    if rollout_config.per_turn and rollout_config.max_turn_samples is not None:
        raise ConfigError(
            f"EnvRolloutWorker does not apply max_turn_samples={rollout_config.max_turn_samples}: the cap keeps a "
            "random share of each episode's turns reweighted by turns/kept, which is unbiased only when the "
            "loss divides by the estimated token count, and AsyncGRPOTrainer divides by the kept tokens of each "
            "micro-batch (the worker cannot set it), so the reweighting would scale the step up. Bound a step "
            "with AsyncGRPOConfig's per_device_train_batch_size or token_budget instead, and leave it None"
        )
    return rollout_config


def worker_processor(
    processor: Processor | None, tokenizer: PreTrainedTokenizerBase, *, per_turn: bool, allow_non_additive: bool
) -> Processor:
    """``processor``, by default a :class:`~trl_env.chat.template_processor.ChatTemplateProcessor`, once checked.

    It must say how a model turn ends, and (unless ``per_turn`` or ``allow_non_additive``) be additive with
    ``tokenizer``.

    Raises:
        TemplateError: the processor is not additive with this tokenizer (the report's first rows).
    """
    # per_turn: the template renders every prompt, no chunk is joined to another (no additivity check needed)
    processor = processor if processor is not None else ChatTemplateProcessor(tokenizer, per_turn=per_turn)
    require_turn_delimited(processor)
    if not allow_non_additive and not per_turn:
        report = check_additivity(tokenizer, processor)
        if not report.ok:
            raise TemplateError(
                "the processor is not additive with this tokenizer; fix it or pass allow_non_additive=True\n"
                + report.table(5)
            )
    return processor
