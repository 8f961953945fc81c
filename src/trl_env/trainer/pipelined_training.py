"""The trainer's side of pipelined rollouts: the checks, the prompt twin, weight publishing and the metrics.

:func:`start_pipeline` connects a :class:`~trl_env.trainer.pipeline.RolloutPipeline` to a ``GRPOTrainer``:
its prompts come from a twin of the trainer's train dataloader, a callback publishes the policy after every
optimizer step and stops the pipeline when training ends, and :meth:`TrainerPipeline.take_logged` logs, per
generation batch:

* ``pipeline/staleness``: optimizer steps between the policy that sampled the batch and the one training on it;
* ``pipeline/trainer_wait_s`` and ``pipeline/trainer_idle_fraction``: how long (and what fraction of the time
  since the previous batch) the trainer waited for rollouts;
* ``pipeline/generator_busy_fraction``: the fraction of that time the background spent playing episodes;
* ``pipeline/replayed``: batches played again because they did not match TRL's prompts or the bound (cumulative).

The importance-ratio figures (``sampling/importance_sampling_ratio/*``, ``sampling/is_clipped_fraction``) are
logged by the trainer when it corrects the loss (:mod:`~trl_env.trainer.off_policy`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from transformers import TrainerCallback

from trl_env.core import Env
from trl_env.engine.rollout import RolloutEngine
from trl_env.errors import ConfigError
from trl_env.trainer.pipeline import RolloutPipeline, RolloutPipelineError
from trl_env.trainer.policy_snapshot import PolicySnapshot
from trl_env.trainer.prompt_lookahead import PromptLookahead
from trl_env.trainer.trl_compat import log_metric, uses_vllm
from trl_env.trainer.zero_variance import GroupFilter


def check_pipelined_trainer(trainer: Any, max_staleness: int) -> None:
    """Refuse a trainer that cannot train pipelined samples correctly; tell one that can to correct them.

    The flag is set on every process at its first rollout, so each corrects every batch and the collectives
    of the correction stay matched. With the trainer's vLLM, TRL's own correction applies (any trainer class),
    on one process and without sleep mode: vLLM's generate calls are collective across processes and must not
    run on a background thread, and an engine put to sleep during the optimizer step cannot sample meanwhile.

    Raises:
        ConfigError: the trainer cannot correct the loss for older policies, or its vLLM cannot sample in the
            background.
    """
    if uses_vllm(trainer):
        args = trainer.args
        problem = (
            "several processes"
            if trainer.accelerator.num_processes > 1
            else "vllm_enable_sleep_mode=True"
            if getattr(args, "vllm_enable_sleep_mode", False)
            else None
        )
        if problem is not None:
            raise ConfigError(
                f"max_staleness={max_staleness} with the trainer's vLLM needs one process and no sleep mode; this "
                f"run has {problem}. Use max_staleness=0, or TRL's AsyncGRPOTrainer with trl-env's rollout worker "
                "(docs/async.md)"
            )
        return  # TRL corrects every batch of its own vLLM path (vllm_importance_sampling_correction)
    if not getattr(trainer, "corrects_off_policy", False):
        raise ConfigError(
            f"max_staleness={max_staleness} trains on samples from a policy up to {max_staleness} steps old, and "
            f"{type(trainer).__name__} corrects the loss for that only on its own vLLM path; use "
            "trl_env.trainer.turn_level_grpo.TurnLevelGRPOTrainer (advantage_mode='episode' is plain GRPO), which "
            "applies TRL's importance sampling correction to any generator"
        )
    trainer.samples_off_policy = True


class LockedVLLM:
    """The trainer's vLLM generator, never sampling while TRL syncs weights into the same engine.

    TRL syncs on the training thread (before each ``rollout_func`` call); the pipeline samples on its own thread.
    A lock around both keeps every generate call on one set of weights.
    """

    def __init__(self, generator: Any, trainer: Any) -> None:
        self.generator = generator
        self.trainer = trainer
        self.lock = threading.Lock()
        handle = trainer.vllm_generation
        sync = handle.sync_weights

        def locked_sync(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                return sync(*args, **kwargs)

        handle.sync_weights = locked_sync  # this trainer's engine only

    def __getattr__(self, name: str) -> Any:  # stop ids, any_rank_live, calls: the wrapped generator's
        return getattr(self.generator, name)

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Any]:
        with self.lock:
            return self.generator.generate(contexts, max_new_tokens)

    def weights_version(self) -> int:
        """The step whose weights the engine holds (TRL's last sync)."""
        return max(0, int(getattr(self.trainer, "_last_loaded_step", 0)))


class PublishPolicy(TrainerCallback):
    """Publishes the policy to the pipeline after every optimizer step; stops the pipeline when training ends."""

    def __init__(self, pipeline: RolloutPipeline, trainer: Any) -> None:
        self.pipeline = pipeline
        self.trainer = trainer

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model = self.trainer.accelerator.unwrap_model(self.trainer.model)
        self.pipeline.publish(state.global_step, model)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.pipeline.close()


class TrainerPipeline(RolloutPipeline):
    """A :class:`RolloutPipeline` that logs its figures to the trainer at every batch it hands over."""

    _last_take: float | None = None
    _last_busy: float = 0.0

    def take_logged(self, trainer: Any, seeds: list[str]) -> tuple[list[Any], int]:
        """The episodes for ``seeds`` and the policy version that sampled them; logs the pipeline metrics."""
        step = trainer.state.global_step
        start = time.perf_counter()
        played = self.take(seeds, step)
        now = time.perf_counter()
        wait = now - start
        log_metric(trainer, "pipeline/staleness", step - played.version)
        log_metric(trainer, "pipeline/trainer_wait_s", wait)
        log_metric(trainer, "pipeline/replayed", self.replayed)
        if self._last_take is not None and now > self._last_take:
            period = now - self._last_take
            log_metric(trainer, "pipeline/trainer_idle_fraction", min(1.0, wait / period))
            log_metric(trainer, "pipeline/generator_busy_fraction", min(1.0, (self.busy_s - self._last_busy) / period))
        self._last_take, self._last_busy = now, self.busy_s
        return played.episodes, played.version


def start_pipeline(
    trainer: Any,
    engine: RolloutEngine,
    env_factory: Callable[[], Env],
    snapshot: PolicySnapshot | None,
    max_staleness: int,
    progress: bool,
    group_filter: GroupFilter | None = None,
) -> TrainerPipeline:
    """Start pipelined rollouts for ``trainer`` with ``engine`` (whose generator samples ``snapshot``'s weights).

    Args:
        trainer: the ``GRPOTrainer`` being trained.
        engine: plays the episodes; used by the background thread only.
        env_factory: makes a fresh env per episode.
        snapshot: the sampler's weights, or None when the generator is the user's own.
        max_staleness: the bound, in optimizer steps (>= 1).
        progress: show a progress bar per batch.
        group_filter: zero-variance groups (:mod:`~trl_env.trainer.zero_variance`): each batch's replacement groups
            are played right after it, on the background thread, with the same weights.

    Returns:
        The running pipeline; a callback on the trainer publishes the policy and stops it at the end.
    """
    from trl_env.trainer.rollout_func import prompt_to_seed

    args = trainer.args
    every = args.steps_per_generation * trainer.num_iterations
    twin = trainer.get_train_dataloader()  # the same sampler and seed: the same batches, in the same order
    lookahead = PromptLookahead(lambda: iter(twin), every, prompt_to_seed)
    generator = engine.generator

    def play(seeds: list[str]) -> list[Any]:
        if pipeline.closed:  # no new env pool once closed (a group filter plays replacement groups in a loop)
            raise RolloutPipelineError("the rollout pipeline was closed")
        return engine.run(env_factory, seeds, progress=progress)

    pipeline = TrainerPipeline(
        play if group_filter is None else lambda seeds: group_filter.play(play, seeds),
        iter(lookahead),
        max_staleness=max_staleness,
        steps_per_batch=every / args.gradient_accumulation_steps,
        snapshot=snapshot,
        version=trainer.state.global_step,
        sampler_version=generator.weights_version if isinstance(generator, LockedVLLM) else None,
        abort=engine.close,  # the batch in flight fails at its next env call; its episodes are discarded anyway
    )
    for callback in [c for c in trainer.callback_handler.callbacks if isinstance(c, PublishPolicy)]:
        trainer.remove_callback(callback)  # a previous train() call's: it would keep its snapshot alive
    trainer.add_callback(PublishPolicy(pipeline, trainer))
    return pipeline
