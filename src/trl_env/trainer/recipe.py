"""A CPU-friendly GRPO recipe: ``TrainSettings`` and a ready ``GRPOTrainer`` built from them.

``trl-env train`` and the demo use it; it is also a starting point for your own script.

Example:
    >>> settings = TrainSettings(steps=3, rollout=RolloutConfig(max_turns=5, max_turn_tokens=8))
    >>> settings.batch_size, settings.rollout.max_turns
    (16, 5)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trl_env.engine.config import RolloutConfig
from trl_env.trainer.keep_best import KeepBestWeights
from trl_env.trainer.setting_checks import check_lr_decay, check_tree_credit
from trl_env.trainer.wall_clock import LinearDecayOverMinutes, TimeLimit

DEFAULT_COMPLETION_TOKENS = 1024  # the episode token budget when settings.rollout.max_completion_tokens is None


@dataclass
class TrainSettings:
    """Hyper-parameters of a GRPO run; the rollout's budgets and policies are ``rollout``.

    The episode token budget is ``rollout.max_completion_tokens`` (1024 when None): ``build_trainer`` makes it
    the ``GRPOConfig.max_completion_length`` that the rollout function reads.
    """

    steps: int = 20
    lr: float = 2e-4
    num_generations: int = 8
    prompts_per_step: int = 2
    lora_r: int = 16
    lora_alpha: int | None = None
    beta: float = 0.0
    temperature: float = 1.0
    max_minutes: float | None = None
    keep_best: str | None = None  # a logged metric: the weights of its best running mean are restored at the end
    keep_best_window: int = 6  # steps in that running mean (trl_env.trainer.keep_best)
    lr_decay: str = "steps"  # "steps": lr_scheduler_type over max_steps (TRL's); "minutes": to 0 over max_minutes
    seed: int = 0
    output_dir: str = "outputs/train"
    report_to: str = "none"
    logging_steps: int = 1
    bf16: bool = False
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    advantage: str = "episode"  # "episode" (plain GRPO), "turn", "anchor" or "tree": see trl_env.trainer.advantages
    gamma: float = 1.0  # discount of later turns' rewards in the turn-level modes
    max_staleness: int = 0  # pipelined rollouts up to N optimizer steps ahead: see trl_env.trainer.pipeline
    transcripts_every: int | None = None  # record every N-th step's episodes (trl-env view)
    transcripts_per_step: int | None = 4
    extra_args: dict[str, Any] = field(default_factory=dict)
    score_sampled_only: bool = True  # the LM head scores only sampled tokens (trl_env.trainer.sampled_token_scoring)

    @property
    def batch_size(self) -> int:
        """Episodes per optimizer step."""
        return self.num_generations * self.prompts_per_step


def build_trainer(
    env_factory: Callable[[], Any],
    model: Any,
    tokenizer: Any,
    seeds: Sequence[str],
    settings: TrainSettings,
    *,
    processor: Any = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> Any:
    """A ready ``GRPOTrainer`` over ``seeds`` with trl-env's rollout function.

    With ``settings.lora_r > 0`` the model is wrapped in a LoRA adapter here. Episodes are sampled
    as :func:`~trl_env.trainer.rollout_func.make_rollout_func` samples them by default
    (:func:`~trl_env.trainer.sampling.trainer_generator`: the trainer's model with every sampling setting
    of its ``GRPOConfig``, ``settings.temperature`` and any ``top_p``/``top_k``/``min_p``/
    ``repetition_penalty`` in ``settings.extra_args``). ``settings.bf16`` trains and samples under
    bfloat16 autocast (about twice as fast on CPUs with AVX512-BF16/AMX; weights stay float32).

    Args:
        env_factory: makes a fresh env per episode.
        model: the policy (a transformers causal LM).
        tokenizer: its tokenizer.
        seeds: training seeds, cycled into the dataset's ``prompt`` column.
        settings: the run's hyper-parameters.
        processor: the chat format (default: the tokenizer's template).
        callbacks: extra ``TrainerCallback`` objects.

    Returns:
        The ``GRPOTrainer``; call ``.train()``. Its ``state.log_history`` holds the logged figures.
    """
    from datasets import Dataset

    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.trainer.rollout_func import env_reward, make_rollout_func
    from trl_env.trainer.sampled_token_scoring import SampledTokenGRPOTrainer

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    check_lr_decay(settings.lr_decay, settings.max_minutes)
    config = grpo_config(settings)
    model = with_lora(model, settings)
    if processor is None:
        processor = ChatTemplateProcessor(tokenizer, per_turn=settings.rollout.per_turn)
    rollout_func = make_rollout_func(
        env_factory,
        processor,
        config=settings.rollout,
        transcripts_every=settings.transcripts_every,
        transcripts_per_step=settings.transcripts_per_step,
        max_staleness=settings.max_staleness,
    )
    all_callbacks = list(callbacks)
    if settings.max_minutes is not None:
        all_callbacks.append(TimeLimit(settings.max_minutes))
    if settings.lr_decay == "minutes":
        all_callbacks.append(LinearDecayOverMinutes(settings.max_minutes))  # type: ignore[arg-type]  # checked above
    if settings.keep_best is not None:
        all_callbacks.append(KeepBestWeights(settings.keep_best, settings.keep_best_window))
    check_tree_credit(settings.rollout.tree, settings.advantage, settings.num_generations)  # now, not at step 1
    trainer_class: Any = SampledTokenGRPOTrainer  # GRPOTrainer scoring only the sampled tokens
    extra: dict[str, Any] = {}
    # it also corrects pipelined batches and trains per-turn samples
    if settings.advantage != "episode" or settings.max_staleness > 0 or settings.rollout.per_turn:
        from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer

        trainer_class, extra = TurnLevelGRPOTrainer, {"advantage_mode": settings.advantage, "gamma": settings.gamma}
    trainer = trainer_class(
        **extra,
        model=model,
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": training_prompts(seeds, settings)}),
        rollout_func=rollout_func,
        callbacks=all_callbacks,
    )
    trainer.score_sampled_only = settings.score_sampled_only
    return trainer


def training_prompts(seeds: Sequence[Any], settings: TrainSettings) -> list[Any]:
    """The dataset's ``prompt`` column: ``seeds`` cycled to cover ``settings.steps`` steps.

    Example:
        >>> training_prompts(["a", "b"], TrainSettings(steps=2, prompts_per_step=3))
        ['a', 'b', 'a', 'b', 'a', 'b']
    """
    needed = settings.steps * settings.prompts_per_step
    return [seeds[i % len(seeds)] for i in range(max(needed, len(seeds)))]


def grpo_config(settings: TrainSettings, **overrides: Any) -> Any:
    """The ``GRPOConfig`` of ``settings`` (``settings.extra_args`` and ``overrides`` added to it).

    :func:`build_trainer` uses it; a comparison with another trainer setup (TRL's own
    ``environment_factory``, ``experiments/vs_trl_tools.py``) uses it for the same recipe.

    Args:
        settings: the run's hyper-parameters.
        **overrides: more ``GRPOConfig`` fields, e.g. ``max_tool_calling_iterations``.

    Returns:
        A ``trl.GRPOConfig``.

    Example:
        >>> grpo_config(TrainSettings(steps=3, output_dir="/tmp/x"), max_tool_calling_iterations=2).max_steps
        3
    """
    import torch
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=settings.output_dir,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=1,
        num_generations=settings.num_generations,
        max_completion_length=settings.rollout.max_completion_tokens or DEFAULT_COMPLETION_TOKENS,
        max_steps=settings.steps,
        learning_rate=settings.lr,
        beta=settings.beta,
        temperature=settings.temperature,
        logging_steps=settings.logging_steps,
        report_to=settings.report_to,
        save_strategy="no",
        use_cpu=not torch.cuda.is_available(),
        bf16=settings.bf16,
        seed=settings.seed,
        data_seed=settings.seed,
        disable_tqdm=True,
        gradient_checkpointing=False,  # short episodes: memory is no issue, recomputation costs a third more
        **{**settings.extra_args, **overrides},
    )


def with_lora(model: Any, settings: TrainSettings) -> Any:
    """``model`` wrapped in the LoRA adapter of ``settings`` (all linear layers), or itself when ``lora_r`` is 0.

    Args:
        model: a transformers causal LM.
        settings: ``lora_r`` and ``lora_alpha`` (default ``2 * lora_r``).

    Returns:
        A ``peft`` model, or ``model`` unchanged.
    """
    if settings.lora_r <= 0:
        return model
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(
        r=settings.lora_r,
        lora_alpha=settings.lora_alpha or 2 * settings.lora_r,
        target_modules="all-linear",
        lora_dropout=0.0,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, lora)


def save_merged(trainer: Any, tokenizer: Any, output_dir: str | Path) -> Path:
    """Save the trained policy as a plain model directory (LoRA adapters merged in).

    Args:
        trainer: a trained ``GRPOTrainer``.
        tokenizer: saved next to the weights.
        output_dir: the folder to write.

    Returns:
        The folder, loadable with ``AutoModelForCausalLM.from_pretrained``.
    """
    model = trainer.model
    if hasattr(model, "merge_and_unload"):  # a peft model: merge the adapters into the base weights
        model = model.merge_and_unload()
    path = Path(output_dir)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path
