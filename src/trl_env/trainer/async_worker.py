"""A rollout worker for TRL's ``AsyncGRPOTrainer``: trl-env episodes behind TRL's ``RolloutWorkerProtocol``.

TRL 1.16's ``trl.experimental.async_grpo.AsyncGRPOTrainer`` trains on ``RolloutSample``s that a worker pushes
onto ``rollout_buffer`` while the trainer keeps optimizing; its own worker only knows tool-calling
``environment_factory`` envs. :class:`EnvRolloutWorker` plays any trl-env :class:`~trl_env.core.Env` instead,
with the whole engine (:class:`~trl_env.engine.rollout.RolloutEngine`: the env pool, deadlines, masks for env and
tool tokens, the sampled logprobs), in a background thread of the trainer's process, generating through any
generator (for the trainer: an :class:`~trl_env.generation.openai_server.OpenAIServerGenerator` on the trainer's
vLLM server, whose weights the trainer syncs).

The thread plays batches of ``groups_per_batch`` groups (``num_generations`` episodes of one seed each) and pushes
one sample per scored episode (:mod:`trl_env.trainer.async_samples`), or under ``history="template"``/``"window"``
one per model turn of it, each with the episode's group advantage unscaled: ``AsyncGRPOTrainer``'s loss is a mean
over trained tokens, so an episode's turns weigh together exactly as its one sequence would. Staleness follows
TRL: each sample carries the policy version current when its batch started (``update_model_version`` moves it;
the trainer calls it after every weight sync), and the trainer drops a sample whose version lags its own by more
than its ``max_staleness``. With ``max_staleness`` set here too, the worker drops a batch that is already that
stale when it ends, rather than queueing samples the trainer would drop (counted in ``rollout/dropped_stale_total``).

Example:
    >>> worker = EnvRolloutWorker(GuessNumberEnv, ["3", "9"], generator, tokenizer, num_generations=2,
    ...                           groups_per_batch=1, max_turns=2, max_turn_tokens=4)
    >>> worker.start()
    >>> sample = worker.rollout_buffer.get(timeout=120)
    >>> sample.model_version, sample.group_id, len(sample.input_ids) == len(sample.old_log_probs)
    (0, 0, True)
    >>> worker.stop()
    >>> worker.check_health(stale_after_s=300.0)
"""

from __future__ import annotations

import itertools
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from trl_env.core import Env, Generator, Processor
from trl_env.engine.config import RolloutConfig
from trl_env.engine.rollout import RolloutEngine
from trl_env.episode import Episode
from trl_env.errors import ConfigError, TrlEnvError
from trl_env.trainer.async_samples import episode_reward, episodes_to_samples
from trl_env.trainer.async_settings import worker_config, worker_processor
from trl_env.trainer.failures import FailureMonitor
from trl_env.trainer.metrics import episode_metrics, episode_sums

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


class RolloutWorkerError(TrlEnvError, RuntimeError):
    """The rollout worker's thread failed, ended or stalled; the message carries its traceback."""


class EnvRolloutWorker:
    """Plays trl-env episodes in a background thread and queues them as TRL ``RolloutSample``s.

    Pass it as ``AsyncGRPOTrainer(rollout_worker=...)``; the trainer starts it after its first weight sync,
    drains ``rollout_buffer`` and ``metrics_queue``, calls ``update_model_version`` after each sync,
    ``check_health`` while it waits for samples, and ``stop`` when training ends.

    Args:
        env_factory: makes a fresh env per episode.
        seeds: the seeds, one group each; a sequence is cycled for ever, any other iterable is read once (when it
            runs out, the worker ends and ``check_health`` says so).
        generator: the sampling backend; for the trainer, an ``OpenAIServerGenerator`` on its vLLM server
            (started with ``--logprobs-mode processed_logprobs`` and the trainer's ``temperature``).
        tokenizer: the policy's tokenizer.
        processor: the chat format; defaults to :class:`~trl_env.chat.template_processor.ChatTemplateProcessor`
            (``per_turn=True`` under a per-turn ``history``, where no additivity check is needed).
        num_generations: episodes per seed (the GRPO group).
        groups_per_batch: groups played together in one engine run.
        config: budgets and policies; ``settings`` (:class:`RolloutConfig` fields) override it. ``history``
            ``"template"``/``"window"`` queues one sample per model turn (``max_turn_samples`` must stay None); a
            tree rollout is refused.
        max_staleness: drop a batch whose version lags the current one by more than this when it ends (None: leave
            it to the trainer, which drops such samples anyway).
        queue_maxsize: the capacity of ``rollout_buffer`` (0: unbounded); a full queue pauses the thread.
        lora_name: with adapter-only weight sync, the adapter name the trainer publishes (``"trl-policy"``): the
            generator's ``model`` becomes ``f"{lora_name}-v{version}"`` at each version.
        allow_non_additive: use a processor that fails :func:`~trl_env.checks.additivity.check_additivity`.
        max_failure_rate: fail the worker (``EnvFailuresError``) when every episode of a batch failed, or more than
            this fraction over ``failure_window`` batches.
        failure_window: batches that fraction is taken over.
        on_episodes: called in the thread with each batch's episodes and their version (transcripts, checks).
        stop_timeout: seconds ``stop`` waits for the batch in flight before it closes the env pool under it.
    """

    def __init__(
        self,
        env_factory: Callable[[], Env],
        seeds: Iterable[str],
        generator: Generator,
        tokenizer: PreTrainedTokenizerBase,
        processor: Processor | None = None,
        *,
        num_generations: int = 8,
        groups_per_batch: int = 4,
        config: RolloutConfig | None = None,
        max_staleness: int | None = None,
        queue_maxsize: int = 0,
        lora_name: str | None = None,
        allow_non_additive: bool = False,
        max_failure_rate: float = 0.5,
        failure_window: int = 10,
        on_episodes: Callable[[list[Episode], int], None] | None = None,
        stop_timeout: float = 10.0,
        **settings: Any,
    ) -> None:
        rollout_config = worker_config(
            config,
            settings,
            generator,
            num_generations=num_generations,
            groups_per_batch=groups_per_batch,
            max_staleness=max_staleness,
            lora_name=lora_name,
        )
        processor = worker_processor(
            processor, tokenizer, per_turn=rollout_config.per_turn, allow_non_additive=allow_non_additive
        )
        self.env_factory = env_factory
        self.engine = RolloutEngine(generator, processor, tokenizer, rollout_config)
        self.num_generations, self.groups_per_batch = num_generations, groups_per_batch
        self.max_staleness, self.lora_name = max_staleness, lora_name
        self.on_episodes, self.stop_timeout = on_episodes, stop_timeout
        # queue.Queue, not multiprocessing's: the worker is a thread of the trainer's process (the protocol allows it)
        self.rollout_buffer: queue.Queue = queue.Queue(maxsize=queue_maxsize)
        self.metrics_queue: queue.Queue = queue.Queue(maxsize=4096)
        self._seeds = _seed_stream(seeds)
        self._failures = FailureMonitor(max_rate=max_failure_rate, window=failure_window)
        self._version = 0  # an int written by the trainer's thread, read here: one atomic store
        self._next_group = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: tuple[BaseException, str] | None = None
        self._exhausted = False
        self._heartbeat = time.time()

    @property
    def model_version(self) -> int:
        """The policy version new batches are tagged with."""
        return self._version

    def update_model_version(self, model_version: int) -> None:
        """Tag batches that start from now on with ``model_version`` (the trainer calls it after each weight sync).

        Args:
            model_version: the version the trainer's vLLM server now serves.
        """
        self._version = int(model_version)
        if self.lora_name is not None:  # in vLLM an adapter is a model name: request the one just published
            self.engine.generator.model = f"{self.lora_name}-v{self._version}"  # type: ignore[attr-defined]

    def start(self) -> None:
        """Start the background thread (once; a second call does nothing)."""
        if self._thread is not None:
            return
        self.update_model_version(self._version)
        self._heartbeat = time.time()
        self._thread = threading.Thread(target=self._run, name="trl-env-rollout-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the env pool.

        The batch in flight is discarded. ``stop`` waits ``stop_timeout`` seconds for it, then closes the env
        pool under it (its env calls then fail and the thread ends); the thread is a daemon, so it never holds
        the process open.
        """
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(self.stop_timeout)
            if thread.is_alive():
                self.engine.close()  # the run in flight fails on its next env call
                thread.join(self.stop_timeout)
        self.engine.close()

    def check_health(self, stale_after_s: float) -> None:
        """Raise if the thread failed, ended, or has not finished a batch for ``stale_after_s`` seconds.

        Args:
            stale_after_s: the longest a batch may run (or a full queue may hold the thread) unnoticed.

        Raises:
            RolloutWorkerError: with the thread's traceback when it raised.
        """
        if self._failure is not None:
            error, trace = self._failure
            raise RolloutWorkerError(f"the rollout worker's thread failed:\n{trace}") from error
        if self._thread is None or self._stop.is_set():
            return
        if self._exhausted:
            raise RolloutWorkerError(f"the rollout worker ran out of seeds after {self._next_group} groups")
        if not self._thread.is_alive():
            raise RolloutWorkerError("the rollout worker's thread ended without an error")
        age = time.time() - self._heartbeat
        if age > stale_after_s:
            raise RolloutWorkerError(
                f"the rollout worker has not finished a batch for {age:.0f} s (> {stale_after_s:.0f} s): an env or "
                "the generator hangs, or groups_per_batch is too large for the trainer's heartbeat_stale_after_s"
            )

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                seeds = list(itertools.islice(self._seeds, self.groups_per_batch))
                if not seeds:
                    self._exhausted = True
                    return
                self._play(seeds)
        except BaseException as error:  # noqa: BLE001 -- surfaced by check_health, never swallowed
            if not self._stop.is_set():  # after stop, errors come from closing the pool under the run
                self._failure = (error, traceback.format_exc())
        finally:
            if not self._stop.is_set():
                self.engine.close()

    def _play(self, seeds: list[str]) -> None:
        """Play one batch of groups and queue its samples."""
        version = self._version
        self._heartbeat = time.time()
        start = time.perf_counter()
        episodes = self.engine.run(self.env_factory, [seed for seed in seeds for _ in range(self.num_generations)])
        if self._stop.is_set():
            return
        if self.on_episodes is not None:
            self.on_episodes(episodes, version)
        self._failures.observe(episodes)
        first_group, self._next_group = self._next_group, self._next_group + len(seeds)
        config = self.engine.config
        samples = episodes_to_samples(
            episodes, self.num_generations, first_group, version, config.failure_reward, per_turn=config.per_turn
        )
        stale = self.max_staleness is not None and self._version - version > self.max_staleness
        metrics: dict[str, float | tuple[float, float]] = {
            **episode_metrics(episode_sums(episodes)),
            "rollout/batch_s": time.perf_counter() - start,
            "rollout/generator_busy_frac": (self.engine.stats.generate_s, self.engine.stats.wall_s),
            "rollout/episodes_total": float(len(episodes)),
            "rollout/failed_episodes_total": float(sum(e.failed for e in episodes)),
            "rollout/samples_total": float(len(samples)),
            "rollout/dropped_stale_total": float(len(samples)) if stale else 0.0,
        }
        if config.per_turn:  # turn samples per scored episode, as a rate: TRL sums both parts over its window
            scored = sum(episode_reward(e, config.failure_reward) is not None for e in episodes)
            metrics["rollout/turn_samples_per_episode"] = (float(len(samples)), float(scored))
        if not stale:
            metrics["rollout/backpressure_s"] = self._push(samples)
        self._push_metrics(metrics)
        self._heartbeat = time.time()

    def _push(self, samples: list[Any]) -> float:
        """Queue ``samples``, waiting while the queue is full; return the seconds spent waiting."""
        waited = 0.0
        for sample in samples:
            while not self._stop.is_set():
                sample.enqueued_at = time.time()
                try:
                    self.rollout_buffer.put(sample, timeout=0.1)
                    break
                except queue.Full:
                    waited += 0.1
                    self._heartbeat = time.time()  # blocked by the trainer, not stalled
        return waited

    def _push_metrics(self, metrics: dict[str, Any]) -> None:
        try:
            self.metrics_queue.put_nowait(metrics)
        except queue.Full:
            pass  # a trainer that does not drain metrics must never block rollouts


def _seed_stream(seeds: Iterable[str]) -> Iterator[str]:
    """A sequence cycled for ever, or any other iterable read once."""
    if isinstance(seeds, Sequence) and not isinstance(seeds, str):
        if not seeds:
            raise ConfigError("seeds is empty: the worker needs at least one seed")
        return itertools.cycle(list(seeds))
    return iter(seeds)
