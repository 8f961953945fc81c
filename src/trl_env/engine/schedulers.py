"""The two schedules of a rollout: turn-synchronous and per-episode.

* ``"turn"``: each turn, every live episode's context goes to the generator in one call, then every
  env steps, and the next turn starts when the slowest env has answered.
* ``"episode"``: each episode advances on its own. Env calls of all episodes run concurrently in the
  pool; whenever the generator is free, the contexts that are ready (their env answered) go to it in one
  call (up to ``max_batch``), after waiting for envs still answering: at most ``gather_window`` seconds
  (by default half the duration of the previous generator call), and not at all once every env has answered.
  With a :class:`~trl_env.core.ConcurrentGenerator` (a server that batches continuously) each ready
  context is sent at once as its own request and the engine never waits on the generator.

Under both, episodes beyond ``env_workers`` (and tree branches beyond them) queue in the env pool and start
when an ended episode frees a worker, so any number of episodes runs on any number of workers. A turn then
starts once the pool is idle (:meth:`~trl_env.envpool.pool.EnvPool.wait_idle`) with every episode whose
env has answered, and the gathering window waits only for envs that can answer.

Both drive the same per-episode transitions (:class:`~trl_env.engine.episode_steps.EpisodeSteps`), so an
episode's tokens, budgets and faults do not depend on the schedule: with a generator whose output depends
only on the context, both schedules give identical episodes.

The collective-call rule (TRL's vLLM server mode, :class:`~trl_env.core.CollectiveGenerator`): every
process must call ``generate`` the same number of times. Under ``"episode"`` each scheduling round makes
exactly one ``any_rank_live`` all-reduce and one ``generate`` call on every process (with no contexts when
none is ready), and the rounds end on all processes together when no process has work left; a round never
blocks longer than the gathering window waiting for envs, so a process with ready contexts is never held up
by another process's slow env for more than that.

Example:
    >>> from trl_env.engine.rollout import RolloutConfig, RolloutEngine
    >>> engine = RolloutEngine(generator, processor, tokenizer, RolloutConfig(max_turns=2, schedule="episode"))
    >>> [e.num_turns for e in engine.run(GuessNumberEnv, ["3", "9"])], engine.stats.schedule
    ([2, 2], 'episode')
    >>> engine.close()
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait

from tqdm.auto import tqdm

from trl_env.core import CollectiveGenerator, ConcurrentGenerator, Generation, Generator
from trl_env.engine.episode_steps import EpisodeSteps
from trl_env.engine.generator_use import CallCost, RolloutStats
from trl_env.engine.live_episode import LiveEpisode
from trl_env.envpool.pool import EnvSlot
from trl_env.episode import Episode
from trl_env.errors import BackendError

MIN_WINDOW = 0.01  # seconds: the adaptive gathering window's floor (before the first call, too)


def _generate(generator: Generator, runs: list[LiveEpisode], steps: EpisodeSteps, stats: RolloutStats) -> list:
    budget = max((run.turn_budget(steps.config) for run in runs), default=1)
    start = time.perf_counter()
    generations = generator.generate([run.context for run in runs], budget)
    stats.busy(start, time.perf_counter())
    if len(generations) != len(runs):
        raise BackendError(f"generator returned {len(generations)} results for {len(runs)} contexts")
    if runs:
        stats.generate_calls += 1
        stats.contexts += len(runs)
    return generations


def play_turn_synchronous(
    steps: EpisodeSteps, generator: Generator, seeds: Sequence[str], stats: RolloutStats, progress: bool
) -> list[Episode]:
    """Play ``seeds`` turn by turn: one generator call per turn, then every env steps.

    An episode whose env waits for a worker (more episodes or tree branches than ``env_workers``) joins the
    turn after its worker frees up: each turn starts once the pool is idle, with every episode whose env has
    answered, and never waits on a reply that only the end of a live episode could let come.
    """
    pool = steps.pool
    starting: dict[Future, tuple[int, str, EnvSlot] | LiveEpisode] = {}  # resets and forked branches not yet in
    for root, seed in enumerate(steps.roots(seeds)):
        slot, future = pool.reset(seed)
        starting[future] = (root, seed, slot)
    live: list[LiveEpisode] = []
    bar = tqdm(total=len(seeds), desc="rollout episodes", disable=not progress, leave=False)
    while True:
        live += _take_started(steps, starting, has_live=bool(live))
        if not _any_live(generator, bool(live or starting)):
            break
        generations = _generate(generator, live, steps, stats)
        stepping = [run for run, g in zip(live, generations, strict=True) if steps.after_generation(run, g)]
        futures = [pool.step(run.slot, run.turn.action) for run in stepping]  # all envs step concurrently
        live = []
        for run, future in zip(stepping, futures, strict=True):
            if steps.after_reply(run, future.result()):
                source, *copies = steps.branch(run)
                live.append(source)
                starting.update(zip(steps.forks, copies, strict=True))  # a copy plays once its worker has it
                steps.forks.clear()
        bar.update(len(steps.results) - bar.n)
    bar.close()
    return steps.outputs(len(seeds))


def _take_started(
    steps: EpisodeSteps, starting: dict[Future, tuple[int, str, EnvSlot] | LiveEpisode], *, has_live: bool
) -> list[LiveEpisode]:
    """The episodes of ``starting`` whose reset (or fork) has answered, once every env call that can has.

    What is still unanswered then waits for a worker held by a live episode (``EnvPool.wait_idle``); it stays
    in ``starting`` for a later turn. With no live episode the pool's workers are all free or being released,
    so a queued reply is coming: wait for it.
    """
    if not starting:
        return []
    steps.pool.wait_idle()
    if not has_live:
        wait(list(starting), return_when=FIRST_COMPLETED)
    runs: list[LiveEpisode] = []
    for future in [future for future in starting if future.done()]:
        entry = starting.pop(future)
        if isinstance(entry, LiveEpisode):
            future.result()  # an env that cannot be copied raises here; a fault shows in the branch's next step
            runs.append(entry)
        elif (run := steps.start(*entry, future.result())) is not None:
            runs.append(run)
    return runs


def _any_live(generator: Generator, has_live: bool) -> bool:
    """Whether to go on; a collective generator's processes decide together (``generate([])`` keeps in step)."""
    if isinstance(generator, CollectiveGenerator):
        return generator.any_rank_live(has_live)
    return has_live


class _PerEpisode:
    """The per-episode schedule's state: env calls and generations in flight, contexts ready to generate."""

    def __init__(self, steps: EpisodeSteps, generator: Generator, seeds: Sequence[str], stats: RolloutStats) -> None:
        self.steps, self.generator, self.stats = steps, generator, stats
        self.collective = isinstance(generator, CollectiveGenerator) and generator.collective
        self.concurrent = isinstance(generator, ConcurrentGenerator) and not self.collective
        self.count = len(seeds)
        self.cost = CallCost()  # the generator's cost per call, fixed part and per context
        self.ready: list[LiveEpisode] = []
        self.pending: dict[Future, tuple[str, object]] = {}
        for root, seed in enumerate(steps.roots(seeds)):
            slot, future = steps.pool.reset(seed)
            self.pending[future] = ("reset", (root, seed, slot))

    def play(self, progress: bool) -> list[Episode]:
        config = self.steps.config
        cap = config.max_batch or self.count or 1
        bar = tqdm(total=self.count, desc="rollout episodes", disable=not progress, leave=False)
        while True:
            self._gather(cap)
            bar.update(len(self.steps.results) - bar.n)
            has_work = bool(self.ready or self.pending)
            if not (self.generator.any_rank_live(has_work) if self.collective else has_work):
                break
            batch, self.ready = self.ready[:cap], self.ready[cap:]
            if self.concurrent:
                for run in batch:  # one request each: the server batches them continuously
                    self._submit(run)
            elif batch or self.collective:
                start = time.perf_counter()
                generations = _generate(self.generator, batch, self.steps, self.stats)
                if batch:
                    self.cost.add(len(batch), time.perf_counter() - start)
                self._after_generation(batch, generations)
        bar.close()
        return self.steps.outputs(self.count)

    def _window(self) -> float:
        """How long a generator call may wait for more envs: the configured window, or half a call's fixed cost."""
        window = self.steps.config.gather_window
        return window if window is not None else max(MIN_WINDOW, self.cost.fixed_s() / 2)

    def _gather(self, cap: int) -> None:
        """Take every answer in; wait for a first one if nothing is ready, then up to a window for more.

        Waiting costs idle generator time and saves a later call's fixed cost (the part of a call that does
        not grow with its batch: reading the weights, per-step overhead), so the window is half that fixed
        cost, estimated from the calls so far; instant envs all answer at once and end the wait at once.
        """
        self._drain()
        if not self.ready and self.pending:
            if self.collective:  # never hold the other processes up for long
                self._wait(self._window())
            else:
                while not self.ready and self.pending:
                    self._wait(None)
        if self.concurrent or not self.ready:
            return
        deadline = time.perf_counter() + self._window()
        while len(self.ready) < cap and self._env_calls_pending():
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            self._wait(left)

    def _env_calls_pending(self) -> bool:
        """Whether an env call that can answer is in flight; one queued for a worker that a ready episode holds
        cannot (waiting for it would idle the generator for the whole window)."""
        for kind, payload in self.pending.values():
            slot = payload[2] if kind == "reset" else payload.slot if kind == "step" else None
            if slot is not None and not slot.queued:
                return True
        return False

    def _wait(self, timeout: float | None) -> None:
        wait(list(self.pending), timeout=timeout, return_when=FIRST_COMPLETED)
        self._drain()

    def _drain(self) -> None:
        for future in [future for future in self.pending if future.done()]:
            kind, payload = self.pending.pop(future)
            if kind == "reset":
                root, seed, slot = payload
                run = self.steps.start(root, seed, slot, future.result())
                if run is not None:
                    self.ready.append(run)
            elif kind == "step":
                if self.steps.after_reply(payload, future.result()):
                    self.ready.extend(self.steps.branch(payload))
                    self._watch_forks()
            elif kind == "fork":
                future.result()  # an env that cannot be copied raises here; a fault shows in the branch's next step
            else:
                runs = payload
                self._after_generation(runs, future.result())

    def _watch_forks(self) -> None:
        for fork in self.steps.forks:
            self.pending[fork] = ("fork", None)
        self.steps.forks.clear()

    def _after_generation(self, runs: list[LiveEpisode], generations: list[Generation]) -> None:
        if len(generations) != len(runs):
            raise BackendError(f"generator returned {len(generations)} results for {len(runs)} contexts")
        for run, generation in zip(runs, generations, strict=True):
            if self.steps.after_generation(run, generation):
                self.pending[self.steps.pool.step(run.slot, run.turn.action)] = ("step", run)

    def _submit(self, run: LiveEpisode) -> None:
        assert isinstance(self.generator, ConcurrentGenerator)
        start = time.perf_counter()
        future = self.generator.submit([run.context], run.turn_budget(self.steps.config))
        future.add_done_callback(lambda _: self.stats.busy(start, time.perf_counter()))
        self.stats.generate_calls += 1
        self.stats.contexts += 1
        self.pending[future] = ("generate", [run])


def play_per_episode(
    steps: EpisodeSteps, generator: Generator, seeds: Sequence[str], stats: RolloutStats, progress: bool
) -> list[Episode]:
    """Play ``seeds`` with each episode advancing on its own (see the module docstring)."""
    return _PerEpisode(steps, generator, seeds, stats).play(progress)
