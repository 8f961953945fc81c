"""The env pool: user environments' ``reset``/``step`` with isolation, deadlines and clean shutdown.

One env lives in one *slot*; a slot runs on one worker (a child process, or a daemon thread)
for the whole episode. Calls are non-blocking and return futures. An env's own failure is never
raised: the future resolves to an :class:`EnvFault` (``"exception"``, ``"timeout"`` or ``"crash"``).
A broken protocol (wrong return types) is a bug in the env and arrives as the future's
:class:`EnvContractError`.

- Deadlines start when the worker starts the call (waiting for a free worker is never charged).
  A call past its deadline resolves to a timeout fault; its worker is killed (process) or
  abandoned (thread) and replaced, so the pool keeps its size and other slots go on.
- ``isolation="process"`` (default) runs untrusted env code in child processes: a hang, a
  segfault or ``os._exit`` cannot take the trainer down, and a hung call's worker is really
  killed. The cost: ~85 µs per call against ~40 µs for threads on an instant env (2 shared cores;
  noise up to 3x), nothing next to a model's turn; ~15 ms per worker start (forked from a forkserver
  that imports trl-env once, ~4 s, not charged to any deadline); and a picklable factory. Figures
  from benchmarks/env_isolation.py. ``"thread"`` takes any factory, but a hung thread runs on forever
  and a segfault or ``os._exit`` in env code kills the trainer.
- Nothing outlives the pool: workers are daemon threads or killed child processes, and
  :meth:`EnvPool.close` runs on garbage collection and at interpreter exit.

Example:
    >>> class Guess:
    ...     reward, alive = 0.0, True
    ...     def reset(self, seed):
    ...         self.secret = seed
    ...         return self, "Guess the word."
    ...     def step(self, action):
    ...         self.reward, self.alive = float(action == self.secret), False
    ...         return self, "right" if self.reward else "wrong"
    ...     def metrics(self):
    ...         return {"solved": self.reward}
    >>> with EnvPool(Guess, isolation="thread", workers=2, timeout=5.0) as pool:
    ...     slot, first = pool.reset("cat")
    ...     print(first.result())
    ...     print(pool.step(slot, "cat").result())
    ...     print(pool.release(slot).result())
    EnvReply(delta='Guess the word.', reward=0.0, alive=True)
    EnvReply(delta='right', reward=1.0, alive=False)
    {'solved': 1.0}
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Literal

from trl_env.core import Env
from trl_env.envpool.backends import ProcessBackend, ThreadBackend
from trl_env.envpool.isolation import Isolation, place_factory
from trl_env.envpool.ray_cluster import check_ray_resources
from trl_env.envpool.replies import EnvContractError, EnvFault, EnvReply
from trl_env.envpool.slot import EnvSlot
from trl_env.envpool.state import PoolState
from trl_env.errors import ConfigError, ConfigTypeError

__all__ = ["EnvContractError", "EnvFault", "EnvPool", "EnvReply", "EnvSlot", "Isolation"]


class EnvPool:
    """Runs environments' ``reset``/``step`` on isolated workers with a deadline per call.

    Args:
        env_factory: builds one env; called inside the worker. With ``isolation="process"`` it must be
            picklable: a class or function defined at module level (or a ``functools.partial`` of one).
        isolation: ``"process"`` (default: one child process per worker; survives hangs, crashes and
            segfaults), ``"thread"`` (daemon threads; cheaper, but a hung call can't be stopped) or ``"auto"``
            (processes when the factory can go to one, else threads with a warning); :attr:`isolation` is the
            one chosen. ``"ray"``: one Ray actor per worker, on the cluster at ``ray_address``
            (:mod:`trl_env.envpool.ray_backend`; the same guarantees as processes, on any node).
        workers: how many envs run at once; more episodes wait in a queue for a free worker.
        timeout: seconds each call may take, counted from when its worker starts it; None: no limit.
        reuse_envs: keep each worker's env after :meth:`release` and warm-``reset`` it for the next
            episode on that worker instead of building a new one; its ``close()`` then runs at :meth:`close`.
        ray_address: ``isolation="ray"``: the cluster to join (``"host:port"``, ``"auto"``); None: ``$RAY_ADDRESS``,
            else a local instance started for this process (:func:`~trl_env.envpool.ray_cluster.connect`).
        ray_resources: ``isolation="ray"``: what each env actor asks of its node, e.g. ``{"num_cpus": 1,
            "memory": 2**30, "resources": {"sandbox": 1}}`` (:func:`~trl_env.envpool.ray_cluster.check_ray_resources`).

    Attributes:
        env_factory: the factory the pool was built with (checked and, for processes, pickled once, here).
        isolation: ``"process"`` or ``"thread"``.

    Raises:
        TypeError: ``env_factory`` is not callable, or (process isolation) cannot be sent to a child process.
        ValueError: a bad ``isolation``, ``workers`` or ``timeout``; ``isolation="ray"``: Ray is not installed.
        BackendError: ``isolation="ray"``: the cluster cannot be reached, or no node can ever hold one env.
    """

    def __init__(
        self,
        env_factory: Callable[[], Env],
        *,
        isolation: Isolation | Literal["auto"] = "process",
        workers: int = 16,
        timeout: float | None = 60.0,
        reuse_envs: bool = False,
        ray_address: str | None = None,
        ray_resources: dict[str, Any] | None = None,
    ) -> None:
        if not callable(env_factory):
            raise ConfigTypeError(f"env_factory must be a class or function that makes a new env, got {env_factory!r}")
        if isolation not in ("thread", "process", "ray", "auto"):
            raise ConfigError(f"EnvPool isolation must be 'thread', 'process', 'ray' or 'auto', got {isolation!r}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"EnvPool workers must be an int >= 1, got {workers!r}")
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0 or not math.isfinite(timeout)):
            raise ConfigError(f"EnvPool timeout must be a positive number of seconds or None, got {timeout!r}")
        self.env_factory, self.workers, self.timeout, self.reuse_envs = env_factory, workers, timeout, reuse_envs
        self.isolation, data = place_factory(env_factory, isolation)
        backend: Callable[[], Any]
        if self.isolation == "ray":
            backend = _ray_backends(data, reuse_envs, ray_address, check_ray_resources(ray_resources or {}))
        elif data is not None:
            backend = lambda: ProcessBackend(data, reuse=reuse_envs)  # noqa: E731
        else:
            backend = lambda: ThreadBackend(env_factory, reuse=reuse_envs)  # noqa: E731
        self._state = PoolState(backend, workers=workers, timeout=timeout)
        self._finalizer = weakref.finalize(self, self._state.close)
        self._finalizer.atexit = False  # the state's own atexit hook closes it, before multiprocessing's

    @property
    def nodes(self) -> list[str | None]:
        """``isolation="ray"``: the Ray node id of each worker's actor (None: not started, or lost).

        Example:
            >>> with EnvPool(dict, isolation="thread", workers=2) as pool:
            ...     pool.nodes
            [None, None]
        """
        return [getattr(worker.backend, "node_id", None) for worker in self._state.workers]

    def reset(self, seed: str) -> tuple[EnvSlot, Future[EnvReply | EnvFault]]:
        """Start an episode: on a free worker (or once one frees up) build the env and call ``reset(seed)``.

        Returns:
            The episode's slot and a future of the reset's :class:`EnvReply` or :class:`EnvFault`.
        """
        if not isinstance(seed, str):
            raise ConfigTypeError(f"EnvPool.reset seed must be a str, got {type(seed).__name__} {seed!r}")
        record, future = self._state.reset(seed)
        return EnvSlot(self._state, record), future

    def step(self, slot: EnvSlot, action: str) -> Future[EnvReply | EnvFault]:
        """Call ``step(action)`` on the slot's env after its earlier calls.

        After a timeout or a crash the env is gone and the future resolves to that same fault at once.

        Raises:
            ValueError: the slot is from another pool or was released.
        """
        if not isinstance(action, str):
            raise ConfigTypeError(f"EnvPool.step action must be a str, got {type(action).__name__} {action!r}")
        self._check(slot)
        return self._state.submit(slot._record, "step", action)

    def fork(self, slot: EnvSlot) -> tuple[EnvSlot, Future[EnvReply | EnvFault]]:
        """A new slot holding a copy of the slot's env as it is after the slot's earlier calls (tree rollouts).

        The copy is made in the slot's worker, ordered after its earlier calls: the env's own ``fork()``
        (:class:`~trl_env.core.Forkable`), else ``copy.deepcopy`` (thread isolation) or ``pickle`` (process
        isolation: the pickle travels to another child process; the parent never unpickles it). The new slot
        then takes a free worker (or queues for one) and goes on like any slot: ``step`` it, ``release`` it.
        The two envs evolve independently. Deadlines and faults are as for :meth:`reset`: copying is charged
        to the source's worker, loading the copy to the new one; a fault of either (the env's ``fork()``
        raised, a timeout, a crash) is the new slot's reply, and a lost source makes a lost copy at once.
        With ``reuse_envs`` the new slot's worker closes the env it kept and keeps the copy instead,
        warm-``reset`` for that worker's next episode.

        Returns:
            The new slot and a future of its :class:`EnvReply` (``delta=""``, the copy's ``reward`` and
            ``alive``) or :class:`EnvFault`. An env that cannot be copied (deepcopy or pickle refuses it,
            e.g. it holds a process or a socket) makes the future raise :class:`EnvContractError` naming
            the env class and the cause.

        Raises:
            ValueError: the slot is from another pool or was released.

        Example:
            >>> class Walk:
            ...     reward, alive = 0.0, True
            ...     def reset(self, seed):
            ...         self.path = [seed]
            ...         return self, seed
            ...     def step(self, action):
            ...         self.path.append(action)
            ...         return self, "/".join(self.path)
            >>> with EnvPool(Walk, isolation="thread", workers=2) as pool:
            ...     slot, _ = pool.reset("home")
            ...     _ = pool.step(slot, "left")
            ...     branch, forked = pool.fork(slot)
            ...     print(forked.result())
            ...     print(pool.step(branch, "up").result().delta, pool.step(slot, "down").result().delta)
            EnvReply(delta='', reward=0.0, alive=True)
            home/left/up home/left/down
        """
        self._check(slot)
        record, future = self._state.fork(slot._record)
        return EnvSlot(self._state, record, forked_from=slot.index), future

    def release(self, slot: EnvSlot) -> Future[dict[str, float] | None]:
        """End the episode (finished, failed or timed out): the env's ``metrics()`` then ``close()``, both optional.

        Both run in the worker after the slot's earlier calls, whatever they returned; with ``reuse_envs``
        ``close()`` waits for :meth:`close` and the env stays for the worker's next episode. After a timeout
        or a crash the env is gone, so ``close()`` could not run and the future is None at once (process: the
        env died with its worker; thread: the abandoned thread calls ``close()`` if the hung call ever returns).
        A slot still queued for a worker is dropped (its reset future is cancelled). A failing
        ``metrics()``/``close()`` is logged and gives None.

        Returns:
            A future of ``metrics()``'s ``dict[str, float]``, or None (no ``metrics()``, or env lost).
        """
        self._check(slot)
        return self._state.submit(slot._record, "release", "")

    def wait_idle(self) -> None:
        """Block until no worker has a call running or queued: every call that can run has answered.

        A slot's calls run in order on its worker, so what is still unanswered then belongs to queued slots
        (:attr:`EnvSlot.queued`: resets and forks waiting for a worker), and a worker frees up only when one of
        the slots holding them is released. A turn-synchronous scheduler waits here, never on one queued reply.

        Example:
            >>> class Echo:
            ...     reward, alive = 0.0, True
            ...     def reset(self, seed):
            ...         return self, seed
            ...     def step(self, action):
            ...         return self, action
            >>> with EnvPool(Echo, isolation="thread", workers=1) as pool:
            ...     first, started = pool.reset("3")
            ...     second, queued = pool.reset("9")
            ...     pool.wait_idle()
            ...     print(started.done(), queued.done(), second.queued)
            ...     _ = pool.release(first)
            ...     pool.wait_idle()
            ...     print(queued.done(), second.queued)
            True False True
            True False
        """
        self._state.wait_idle()

    def close(self) -> None:
        """Stop now: pending calls' futures are cancelled, busy workers killed (threads abandoned).

        Idle workers first get up to a second to ``close()`` the envs they hold. Idempotent; also runs
        when the pool is garbage-collected and at interpreter exit.
        """
        self._finalizer()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self, slot: EnvSlot) -> None:
        if not isinstance(slot, EnvSlot) or slot._pool is not self._state:
            raise ConfigError(f"{slot!r} is not a slot of this EnvPool")
        if slot._record.released:
            raise ConfigError(f"{slot!r} was released; reset() a new one")


def _ray_backends(data: bytes | None, reuse: bool, address: str | None, resources: dict[str, Any]) -> Callable[[], Any]:
    """Join the cluster and check the request now (one clear error before any episode); then a backend maker."""
    from trl_env.envpool.ray_backend import RayBackend
    from trl_env.envpool.ray_cluster import actor_options, check_feasible, connect

    ray = connect(address)
    check_feasible(ray, resources)
    options = actor_options(resources)
    return lambda: RayBackend(ray, data, reuse=reuse, options=options)  # type: ignore[arg-type]
