"""Plug trl-env into TRL's ``GRPOTrainer`` as a ``rollout_func``.

The dataset's ``prompt`` column holds seeds (strings). TRL 1.16 passes the prompts already
repeated ``num_generations`` times; each entry becomes one episode with a fresh env from
``env_factory()``. The returned dict has ``prompt_ids``, ``completion_ids``, ``logprobs``,
``env_mask`` and, per sample, ``env_reward``, ``num_turns`` and ``transcript``, which reach
reward functions as keyword arguments; :func:`env_reward` is the reward function that
returns the environment's reward.

Example:
    >>> from trl import GRPOConfig, GRPOTrainer  # doctest: +SKIP
    >>> trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=env_reward,
    ...                       args=GRPOConfig(...), train_dataset=Dataset.from_dict({"prompt": seeds}),
    ...                       rollout_func=make_rollout_func(GuessNumberEnv, max_turns=5))  # doctest: +SKIP
"""

from __future__ import annotations

import os
import warnings
import weakref
from collections.abc import Callable
from typing import Any

from trl_env.chat.template_processor import ChatTemplateProcessor
from trl_env.chat.turn_end import TurnEnd, require_turn_delimited
from trl_env.checks.additivity import check_additivity
from trl_env.core import Env, Generator, Processor
from trl_env.engine.config import RolloutConfig
from trl_env.engine.rollout import RolloutEngine
from trl_env.errors import ConfigError, ConfigTypeError, DataError, TemplateError
from trl_env.trainer.failures import FailureMonitor
from trl_env.trainer.launch_check import launch_problem
from trl_env.trainer.metrics import SUM_EPISODES, SUM_ERRORS, log_episode_metrics
from trl_env.trainer.pipelined_training import LockedVLLM, check_pipelined_trainer, start_pipeline
from trl_env.trainer.policy_snapshot import PolicySnapshot
from trl_env.trainer.rollout_batch import episodes_to_batch
from trl_env.trainer.sampling import snapshot_generator, trainer_generator, trainer_stop_token_ids
from trl_env.trainer.setting_checks import check_tree_credit, check_turn_samples, episode_budget, trainer_advantage
from trl_env.trainer.transcript_tables import attach_tables
from trl_env.trainer.transcripts import FlushTranscripts, TranscriptRecorder
from trl_env.trainer.trl_compat import (
    enable_vllm_cpu_weight_sync,
    log_metric,
    require_supported_trl,
    shorten_unscorable_warning,
    sum_over_processes,
    trainer_tokenizer,
    uses_vllm,
)
from trl_env.trainer.zero_variance import STAT_NAMES, GroupedEpisodes, group_metrics, mask_dropped, trainer_filter


class NonAdditiveProcessorError(TemplateError):
    """The processor failed the additivity check and no override was given."""


def env_reward(
    completions: list[Any], env_reward: list[float | None] | None = None, **kwargs: Any
) -> list[float | None]:
    """TRL reward function: the environment's own reward of each episode (None for a failed episode).

    TRL 1.16 treats a sample whose reward functions all return None as unscorable: it is left out of
    its group's mean and standard deviation and gets advantage 0.

    Example:
        >>> env_reward(["a", "b", "c"], env_reward=[1.0, 0.5, None])
        [1.0, 0.5, None]
    """
    if env_reward is None:
        raise DataError("env_reward needs the 'env_reward' column that make_rollout_func returns")
    return [None if r is None else float(r) for r in env_reward]


def prompt_to_seed(prompt: Any) -> str:
    """The seed string of one dataset prompt: a string, or the last message of a conversation.

    Example:
        >>> prompt_to_seed("7"), prompt_to_seed([{"role": "user", "content": "7"}])
        ('7', '7')
    """
    if isinstance(prompt, str):
        return prompt
    if (
        isinstance(prompt, list)
        and prompt
        and isinstance(prompt[-1], dict)
        and isinstance(prompt[-1].get("content"), str)
    ):
        return prompt[-1]["content"]
    raise ConfigTypeError(
        f"the dataset's prompt column must hold seed strings; got {type(prompt).__name__}: {prompt!r:.80}"
    )


def make_rollout_func(
    env_factory: Callable[[], Env],
    processor: Processor | None = None,
    *,
    config: RolloutConfig | None = None,
    generator: Generator | None = None,
    allow_non_additive: bool = False,
    progress: bool = False,
    transcripts_every: int | None = None,
    transcripts_per_step: int | None = 4,
    max_failure_rate: float = 0.5,
    failure_window: int = 10,
    max_staleness: int = 0,
    **settings: Any,
) -> Callable[[list[Any], Any], dict[str, list[Any]]]:
    """Build a TRL ``rollout_func`` that plays one episode per prompt.

    Args:
        env_factory: makes a fresh env per episode.
        processor: the chat format; defaults to :class:`ChatTemplateProcessor` of the trainer's tokenizer.
        config: budgets and policies; ``settings`` (:class:`RolloutConfig` field names, e.g. ``max_turns=5``)
            override it. Checked here, before training starts. The episode token budget is the trainer's
            ``max_completion_length`` (``config.max_completion_tokens``, when set, must not exceed it), and
            ``config.tree`` needs a trainer with the tree advantage (``TurnLevelGRPOTrainer(advantage_mode="tree")``);
            both are checked by :mod:`~trl_env.trainer.setting_checks` when the trainer first calls.
        generator: the sampling backend; defaults to the trainer's own
            (:func:`~trl_env.trainer.sampling.trainer_generator`: its vLLM, or an :class:`EpisodeCacheGenerator`
            on its model with every sampling setting of its ``GRPOConfig``).
        allow_non_additive: train even when the processor fails :func:`~trl_env.checks.additivity.check_additivity`.
        progress: show a progress bar of the episodes ended.
        transcripts_every: record the episodes of every N-th step to ``OUTPUT_DIR/transcripts*.jsonl``
            (:class:`~trl_env.trainer.transcripts.TranscriptRecorder`; open with ``trl-env view``), and as a
            table to wandb when the trainer's ``report_to`` names it
            (:mod:`~trl_env.trainer.transcript_tables`); None: off.
        transcripts_per_step: episodes recorded per recorded step; None for all.
        max_failure_rate: stop training (:class:`~trl_env.trainer.failures.EnvFailuresError`, showing the first
            errors) when every episode of a step failed, or more than this fraction over ``failure_window`` steps.
        failure_window: the number of steps that fraction is taken over.
        max_staleness: 0 plays each step's episodes when TRL asks for them (every sample on-policy). N >= 1
            pipelines: while a step trains, the next steps' episodes are played in the background with a copy of
            the policy at most N optimizer steps old (:mod:`~trl_env.trainer.pipeline`), and the loss is corrected
            with TRL's importance-sampling settings (:mod:`~trl_env.trainer.off_policy`), which needs
            :class:`~trl_env.trainer.turn_level_grpo.TurnLevelGRPOTrainer` (``advantage_mode="episode"`` is plain
            GRPO), or the trainer's vLLM (``use_vllm=True``, one process, no sleep mode), which TRL corrects.

    ``history="template"``/``"window"`` (a :class:`RolloutConfig` field) trains one sample per model turn under
    :class:`~trl_env.trainer.turn_level_grpo.TurnLevelGRPOTrainer` (:mod:`~trl_env.trainer.turn_samples`); the
    default processor then accepts every chat template, and no additivity check is needed.
    ``zero_variance="filter"``/``"resample"`` takes GRPO groups whose rewards are all equal out of the loss, or
    replaces them with groups of new dataset seeds (:mod:`~trl_env.trainer.zero_variance`; in the background too
    when pipelined); the batch then has a ``zero_variance`` column and ``groups/*`` metrics are logged.

    Returns:
        ``rollout_func(prompts, trainer)`` for ``GRPOTrainer(rollout_func=...)``. Its ``engine`` attribute is
        the :class:`~trl_env.engine.rollout.RolloutEngine` of the latest call (its generator, config and
        ``stats``), None before the first.

    Raises:
        TypeError: the processor cannot say how its turn ends (:class:`~trl_env.core.TurnDelimited`).

    Example:
        >>> rollout_func = make_rollout_func(GuessNumberEnv, max_turns=5, max_turn_tokens=8)
        >>> make_rollout_func(GuessNumberEnv, max_turn=5)
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigTypeError: unknown rollout setting 'max_turn'; the RolloutConfig fields are: ...
    """
    require_supported_trl()
    if not isinstance(max_staleness, int) or isinstance(max_staleness, bool) or max_staleness < 0:
        raise ConfigError(f"max_staleness must be a whole number of optimizer steps >= 0; got {max_staleness!r}")
    if processor is not None:
        require_turn_delimited(processor)  # now, not at the first rollout of training
    enable_vllm_cpu_weight_sync()
    shorten_unscorable_warning()  # a failed episode's row would otherwise print its whole transcript
    base_config = RolloutConfig.from_kwargs(config, **settings)
    # One engine, for the latest trainer only, held with a weak reference: a rollout_func reused across
    # trainers never keeps an old trainer (and its model) alive, and ids of dead trainers are never confused.
    current: dict[str, Any] = {
        "trainer": None, "engine": None, "recorder": None, "tables": None, "pipeline": None, "filter": None
    }  # fmt: skip
    failures = FailureMonitor(max_rate=max_failure_rate, window=failure_window)

    def build(trainer: Any) -> RolloutEngine:
        check_tree_credit(base_config.tree, trainer_advantage(trainer), trainer.num_generations)
        check_turn_samples(base_config, trainer)
        problem = launch_problem(os.environ, trainer.accelerator.num_processes)
        if problem is not None:
            warnings.warn(problem, stacklevel=3)
        tokenizer = trainer_tokenizer(trainer)
        per_turn = base_config.per_turn  # the template renders every prompt: no chunk is joined to another
        chosen = processor if processor is not None else ChatTemplateProcessor(tokenizer, per_turn=per_turn)
        if not allow_non_additive and not per_turn:
            report = check_additivity(tokenizer, chosen)
            if not report.ok:
                raise NonAdditiveProcessorError(
                    "the processor is not additive with this tokenizer, so per-chunk tokenization would differ from "
                    "the text's; fix the processor or pass allow_non_additive=True\n" + report.table(5)
                )
        config = episode_budget(base_config, trainer.max_completion_length)
        stops = trainer_stop_token_ids(trainer, TurnEnd.of(chosen, tokenizer))
        snapshot = None
        if max_staleness > 0:
            check_pipelined_trainer(trainer, max_staleness)
            if generator is None and not uses_vllm(trainer):  # the background samples a copy of the policy
                snapshot = PolicySnapshot(trainer.accelerator.unwrap_model(trainer.model), trainer.state.global_step)
        if generator is not None:
            chosen_generator = generator
        elif snapshot is not None:
            chosen_generator = snapshot_generator(trainer, snapshot.model, tokenizer, stops)
        else:  # not `generator or ...`: an EpisodeCacheGenerator with an empty cache is falsy
            chosen_generator = trainer_generator(trainer, tokenizer, stops)
            if max_staleness > 0:  # the trainer's vLLM: TRL syncs its weights while the background samples
                chosen_generator = LockedVLLM(chosen_generator, trainer)
        engine = RolloutEngine(chosen_generator, chosen, tokenizer, config)
        current["filter"] = group_filter = trainer_filter(trainer, config, prompt_to_seed)
        if max_staleness > 0:  # replacement groups are played in the background too, with the batch's weights
            current["pipeline"] = start_pipeline(
                trainer, engine, env_factory, snapshot, max_staleness, progress, group_filter=group_filter
            )
        return engine

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        known = current["trainer"]
        if current["pipeline"] is not None and current["pipeline"].closed:
            known = None  # training ended and started again (train() called twice): a new snapshot and pipeline
        if known is None or known() is not trainer:
            if current["pipeline"] is not None:
                current["pipeline"].close()
                current["pipeline"] = None
            if current["engine"] is not None:
                current["engine"].close()
            current["engine"] = build(trainer)
            current["trainer"] = weakref.ref(trainer)
            if current["recorder"] is not None:
                current["recorder"].close()
            if transcripts_every is not None:
                current["recorder"] = recorder = TranscriptRecorder(
                    trainer.args.output_dir,
                    current["engine"].tokenizer,
                    every=transcripts_every,
                    per_step=transcripts_per_step,
                    process_index=trainer.accelerator.process_index,
                )
                trainer.add_callback(FlushTranscripts(recorder))  # write what is queued when training ends
                current["tables"] = attach_tables(trainer)  # the same episodes to wandb, if reported to
        engine: RolloutEngine = current["engine"]
        rollout_func.engine = engine  # type: ignore[attr-defined]
        seeds = [prompt_to_seed(p) for p in prompts]
        if current["pipeline"] is not None:
            episodes, version = current["pipeline"].take_logged(trainer, seeds)
        elif current["filter"] is not None:  # every process plays as many rounds as the one that needs most
            episodes = current["filter"].play(
                lambda batch: engine.run(env_factory, batch, progress=progress),
                seeds,
                go_on=lambda more: sum_over_processes(trainer, [float(more)])[0] > 0,
            )
            version = trainer.state.global_step
        else:
            episodes, version = engine.run(env_factory, seeds, progress=progress), trainer.state.global_step
        # env metrics and the failure check see every episode played, replacements left unused included
        played = episodes + episodes.discarded if isinstance(episodes, GroupedEpisodes) else episodes
        process = trainer.accelerator.process_index
        for episode in episodes:  # tree node ids unique over the processes' batches, which TRL gathers
            episode.tree_nodes = [f"{process}/{node}" for node in episode.tree_nodes]
        # one collective per rollout: the metrics and the failure check both use every process's counts
        totals = log_episode_metrics(trainer, played)
        failures.observe(played, counts=(int(totals[SUM_ERRORS]), int(totals[SUM_EPISODES])))
        if current["recorder"] is not None:
            recorded = current["recorder"].record(trainer.state.global_step, episodes)
            if recorded and current["tables"] is not None:
                current["tables"].add(trainer.state.global_step, episodes[:transcripts_per_step])
        batch = episodes_to_batch(episodes, engine.encoder.turn_end_id, engine.config.failure_reward)
        batch["policy_version"] = [version] * len(episodes)
        if isinstance(episodes, GroupedEpisodes):  # zero_variance: mark and mask; the groups/* figures
            mask_dropped(batch, episodes.dropped)
            sums = sum_over_processes(trainer, [episodes.stats[name] for name in STAT_NAMES])
            for name, value in group_metrics(sums).items():
                log_metric(trainer, name, value)
        if engine.config.per_turn:  # TRL copies a scalar onto every row: the trainer's cap on turn samples
            batch["max_turn_samples"] = engine.config.max_turn_samples
        return batch

    rollout_func.engine = None  # type: ignore[attr-defined]
    rollout_func.max_staleness = max_staleness  # type: ignore[attr-defined]
    return rollout_func
