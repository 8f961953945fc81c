"""Pipelined rollouts: the next steps' episodes are played in the background while the current step trains.

``make_rollout_func(..., max_staleness=N)`` with ``N >= 1`` puts a :class:`RolloutPipeline` between TRL and the
rollout engine. Where each part lives:

* **The prompts ahead** come from a twin of the trainer's own train dataloader
  (:mod:`~trl_env.trainer.prompt_lookahead`): the same sampler and seed, so it yields the same generation batches
  TRL will pass, in the same order. The twin is only read on the trainer's thread.
* **The rollouts** run on one background thread, one generation batch at a time, each with the engine's
  per-episode schedule. A batch that will be trained at optimizer step ``t`` starts only once the policy of
  version ``t - N`` or newer is published: that is the staleness bound, enforced when a batch *starts*, so a
  sample is never more than ``N`` steps older than the policy that trains on it.
* **The weights** the background samples with are a :class:`~trl_env.trainer.policy_snapshot.PolicySnapshot`,
  refreshed from the trainer after every optimizer step (:meth:`RolloutPipeline.publish`) and loaded by the
  rollout thread before each batch. A batch records the version it was sampled with.
* **When TRL asks** (:meth:`RolloutPipeline.take`), the head batch is checked against the prompts TRL passed.
  A batch for other prompts (a checkpoint resume moved the data, an epoch ended differently) is discarded, the
  twin is re-aligned, and those prompts are played now with the current policy; so is a batch that would be
  over the bound (only possible if steps were counted differently than planned). Both are counted
  (``pipeline/replayed``), never trained on silently.
* **Errors** in the background are raised by the next :meth:`~RolloutPipeline.take` with the background
  traceback; the thread is a daemon and :meth:`~RolloutPipeline.close` ends it, so Ctrl-C and the end of
  training never wait on it.
* **Stopping**: :meth:`~RolloutPipeline.close` (the end of training, a Ctrl-C inside ``take``, or interpreter
  exit) stops the background from starting another batch and calls ``abort`` (the trainer's: close the engine's
  env pool, so the batch in flight ends at its next env call). At exit the thread is then joined, bounded:
  a daemon thread left inside a torch kernel while the interpreter finalizes can deadlock the exit.

Example:
    >>> played = []
    >>> pipeline = RolloutPipeline(lambda seeds: played.append(seeds) or list(seeds), iter([["a"], ["b"], ["c"]]),
    ...                            max_staleness=1)
    >>> batch = pipeline.take(["a"], step=0)
    >>> batch.episodes, batch.version, batch.replayed
    (['a'], 0, False)
    >>> pipeline.publish(version=1)
    >>> pipeline.take(["b"], step=1).episodes
    ['b']
    >>> pipeline.close()
"""

from __future__ import annotations

import atexit
import threading
import time
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from trl_env.errors import TrlEnvError
from trl_env.trainer.policy_snapshot import PolicySnapshot

RESYNC_WINDOW = 256  # generation batches the twin may skip to find the prompts TRL passed
EXIT_JOIN_S = 20.0  # at interpreter exit, how long a live pipeline's background may take to leave its batch


class RolloutPipelineError(TrlEnvError, RuntimeError):
    """A background rollout failed; the message holds its traceback."""


@dataclass
class PlayedBatch:
    """One generation batch played by the pipeline."""

    seeds: list[str]
    target_step: int
    episodes: list[Any] = field(default_factory=list)
    version: int = -1  # the policy version that sampled it
    play_s: float = 0.0
    replayed: bool = False
    error: str | None = None
    cause: BaseException | None = None
    cancelled: bool = False
    done: threading.Event = field(default_factory=threading.Event)


class RolloutPipeline:
    """Plays generation batches ahead of training on a background thread, within a staleness bound.

    Args:
        play: plays one episode per seed (the engine's ``run``); called on the background thread only.
        lookahead: the seeds of the coming generation batches, in order (e.g. :mod:`~trl_env.trainer.prompt_lookahead`).
        max_staleness: how many optimizer steps older than the training policy a sample may be (>= 1).
        steps_per_batch: optimizer steps between two generation batches.
        snapshot: the sampler's weights, refreshed before each batch; None when the generator is not the trainer's.
        version: the policy version now (the trainer's ``global_step``), when there is no snapshot.
        sampler_version: the version of the weights the generator holds, when the generator syncs them itself
            (the trainer's vLLM, synced by TRL when it asks for a batch); batches wait for it and are tagged with it.
        abort: called (once, from any thread) by :meth:`close` to cut the batch in flight short, e.g. closing the
            engine's env pool so its env calls fail at once.
    """

    def __init__(
        self,
        play: Callable[[list[str]], list[Any]],
        lookahead: Iterator[list[str]] | None,
        *,
        max_staleness: int,
        steps_per_batch: float = 1.0,
        snapshot: PolicySnapshot | None = None,
        version: int = 0,
        sampler_version: Callable[[], int] | None = None,
        abort: Callable[[], None] | None = None,
    ) -> None:
        self.max_staleness = max_staleness
        self.steps_per_batch = steps_per_batch
        self.snapshot = snapshot
        self._play = play
        self._lookahead = lookahead
        self._jobs: deque[PlayedBatch] = deque()  # queued and running, in training order
        self._published = snapshot.version if snapshot is not None else version
        self._sampler_version = sampler_version
        self._abort = abort
        self._wake = threading.Condition()
        self._stop = False
        self.busy_s = 0.0  # time the background spent playing, for the generator's utilisation
        self.play_spans: list[tuple[float, float]] = []  # (start, end) of each batch played, perf_counter seconds
        self.replayed = 0
        self._thread = threading.Thread(target=self._work, name="trl-env-rollouts", daemon=True)
        self._thread.start()
        _watch(self)

    # -- trainer thread ---------------------------------------------------------------------------------------

    def publish(self, version: int, model: Any = None) -> None:
        """The trainer finished optimizer step ``version``: stage its weights and let gated batches start."""
        if self.snapshot is not None and model is not None:
            self.snapshot.publish(model, version)
        with self._wake:
            self._published = max(self._published, version)
            self._wake.notify_all()

    def take(self, seeds: list[str], step: int) -> PlayedBatch:
        """The played batch for ``seeds``, trained at optimizer step ``step``; waits for it if needed.

        Raises:
            RolloutPipelineError: its rollout failed in the background.
        """
        with self._wake:  # a generator that syncs itself may just have done so
            self._wake.notify_all()
        self._fill(step)
        head = self._jobs[0] if self._jobs else None
        if head is None or head.seeds != list(seeds):
            self._discard()
            self._resync(seeds)
            head = self._enqueue(list(seeds), step, replayed=True)
            self._fill(step)
        try:
            while not head.done.wait(0.5):  # a timed wait: Ctrl-C reaches the trainer thread
                if not self._thread.is_alive():
                    raise RolloutPipelineError("the background rollout thread has stopped")
        except KeyboardInterrupt:  # the run is over: stop the background's env calls now, not at exit
            self.close()
            raise
        with self._wake:
            self._jobs.popleft()
        if head.error is not None:
            raise RolloutPipelineError(f"a background rollout failed:\n{head.error}") from head.cause
        if step - head.version > self.max_staleness:  # steps were counted differently than planned: play it again
            self._discard()
            head = self._enqueue(list(seeds), step, replayed=True)
            return self.take(seeds, step)
        self._fill(step + self.steps_per_batch)
        return head

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the end of training): a later ``train()`` needs a new pipeline."""
        return self._stop

    def close(self, join_s: float = 1.0) -> None:
        """Stop the background thread: no batch starts after this, the one in flight is aborted (``abort``);
        wait up to ``join_s`` for the thread to end. Idempotent."""
        with self._wake:
            first, self._stop = not self._stop, True
            for job in self._jobs:
                job.cancelled = True
            self._wake.notify_all()
        if first and self._abort is not None and self._thread.is_alive():
            try:
                self._abort()
            except Exception:  # noqa: BLE001  (stopping must not fail; the batch is discarded either way)
                pass
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=join_s)

    def _enqueue(self, seeds: list[str], target: float, *, replayed: bool = False) -> PlayedBatch:
        job = PlayedBatch(seeds=seeds, target_step=int(target), replayed=replayed)
        self.replayed += replayed
        with self._wake:
            self._jobs.append(job)
            self._wake.notify_all()
        return job

    def _fill(self, step: float) -> None:
        """Queue the batches up to ``max_staleness`` steps ahead of ``step`` (the head one included)."""
        if self._lookahead is None:
            return
        while True:
            target = step + len(self._jobs) * self.steps_per_batch
            if self._jobs and target > step + self.max_staleness:
                return
            seeds = next(self._lookahead, None)
            if seeds is None:
                self._lookahead = None
                return
            self._enqueue(seeds, target)

    def _discard(self) -> None:
        with self._wake:
            for job in self._jobs:
                job.cancelled = True
            self._jobs.clear()

    def _resync(self, seeds: list[str]) -> None:
        """Move the twin past the batch equal to ``seeds`` (the one TRL is training now), or stop looking ahead."""
        if self._lookahead is None:
            return
        for _ in range(RESYNC_WINDOW):
            ahead = next(self._lookahead, None)
            if ahead is None:
                break
            if ahead == list(seeds):
                return
        self._lookahead = None  # play each batch when asked: correct, only not overlapped

    # -- background thread ------------------------------------------------------------------------------------

    def _next_job(self) -> PlayedBatch | None:
        with self._wake:
            while True:
                if self._stop:
                    return None
                job = next((j for j in self._jobs if not j.done.is_set() and not j.cancelled), None)
                if job is not None and self._sampling_version() >= job.target_step - self.max_staleness:
                    return job
                self._wake.wait(0.5 if self._sampler_version is not None else None)

    def _sampling_version(self) -> int:
        return self._sampler_version() if self._sampler_version is not None else self._published

    def _work(self) -> None:
        while (job := self._next_job()) is not None:
            try:
                if self.snapshot is not None:
                    self.snapshot.refresh()
                    job.version = self.snapshot.version
                else:
                    job.version = self._sampling_version()  # the oldest weights of the batch: never under-counted
                start = time.perf_counter()
                job.episodes = self._play(job.seeds)
                end = time.perf_counter()
                job.play_s = end - start
                self.busy_s += job.play_s
                self.play_spans.append((start, end))
            except BaseException as error:  # reported to the trainer by take(), with the traceback
                job.error, job.cause = traceback.format_exc(), error
            finally:
                job.done.set()


_LIVE: weakref.WeakSet[RolloutPipeline] = weakref.WeakSet()
_exit_hook_registered = False


def _watch(pipeline: RolloutPipeline) -> None:
    """Close ``pipeline`` at interpreter exit if nothing else did (e.g. a Ctrl-C outside ``take``)."""
    global _exit_hook_registered
    _LIVE.add(pipeline)
    if not _exit_hook_registered:
        # registered after multiprocessing's hook (imported with the engine): runs before it joins the children
        atexit.register(_close_live_pipelines)
        _exit_hook_registered = True


def _close_live_pipelines() -> None:
    for pipeline in list(_LIVE):
        pipeline.close(join_s=EXIT_JOIN_S)
