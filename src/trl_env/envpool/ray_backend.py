"""The env pool's Ray backend (``isolation="ray"``): each worker's env lives in a Ray actor, on any node.

A :class:`RayBackend` has the same face as the process backend (:mod:`trl_env.envpool.backends`): one call at
a time, a deadline counted from when the actor starts it, and :class:`~trl_env.envpool.backends.WorkerLost` when
the deadline passes (the actor is then killed, ``ray.kill``) or the actor dies (``os._exit``, a segfault, its node
lost). The actor runs the same :class:`~trl_env.envpool.host.EnvHost` as a child process, so envs reply with the
same outcomes, and forks travel pickled from one actor to another through the pool (which never unpickles them).

Each actor asks for the pool's ``ray_resources`` (:mod:`trl_env.envpool.ray_cluster`) and is neither restarted nor
retried by Ray: a restarted actor would have lost its env, and a retried ``step`` would run twice. Actors are
owned by the training process, so Ray kills them when it exits, whatever their calls are doing.

Example (needs a cluster; ``ray.init()`` starts a local one):
    >>> import pickle, ray
    >>> from examples.guess_number import GuessNumberEnv
    >>> worker = RayBackend(ray, pickle.dumps(GuessNumberEnv), reuse=False, options={})  # doctest: +SKIP
    >>> worker.call("reset", "7", timeout=5.0).alive  # doctest: +SKIP
    True
    >>> worker.kill()  # doctest: +SKIP
"""

from __future__ import annotations

import os
import pickle
import signal
import time
from typing import Any

from trl_env.envpool.backends import STARTUP_TIMEOUT_S, WorkerLost
from trl_env.envpool.host import EnvHost
from trl_env.envpool.replies import Outcome
from trl_env.envpool.values import describe

_ACTOR_CLASSES: dict[int, Any] = {}  # id(ray module) -> EnvActor as a Ray actor class, made once per process


class EnvActor:
    """What runs inside each Ray actor: an :class:`~trl_env.envpool.host.EnvHost` over the pickled factory.

    Args:
        factory_bytes: ``pickle.dumps(env_factory)``; a factory that cannot be loaded here makes every reset a
            fault naming the cause (as in a child process).
        reuse: keep the env between episodes.

    Example:
        >>> actor = EnvActor(pickle.dumps(dict), reuse=False)
        >>> type(actor.handle("reset", "1")).__name__  # a dict is no env
        'ContractBreach'
    """

    def __init__(self, factory_bytes: bytes, reuse: bool) -> None:
        self.stopped = False
        _note_sigterm(self)
        try:
            self.host = EnvHost(pickle.loads(factory_bytes), reuse=reuse, pickled_forks=True)
        except BaseException as error:
            message = f"could not load env_factory in the Ray actor: {describe(error)}"
            self.host = EnvHost(None, reuse=reuse, load_error=message, pickled_forks=True)

    def where(self) -> tuple[str, int]:
        """The actor's node id and process id (the pool waits on this before the first call: start-up is free)."""
        import ray

        return ray.get_runtime_context().get_node_id(), os.getpid()

    def handle(self, op: str, arg: Any) -> Outcome:
        """Run one pool call (see :meth:`~trl_env.envpool.host.EnvHost.handle`)."""
        outcome = self.host.handle(op, arg)
        if self.stopped:  # the env's code caught Ray's SystemExit (as the host does): the process stops anyway
            raise SystemExit(1)
        return outcome


def _note_sigterm(actor: EnvActor) -> None:
    """Mark ``actor`` stopped when its process gets SIGTERM, then let Ray's own handler run.

    Ray turns a SIGTERM (the actor's node shutting down) into ``SystemExit`` raised in whatever the actor runs,
    the env's code here, where the host catches it as the env's own fault and the actor would live on. With the
    mark the call ends the actor instead: the pool sees it die (a ``"crash"``, as when the node is lost outright)
    and the next episode gets a fresh one.
    """
    try:
        previous = signal.getsignal(signal.SIGTERM)

        def stop(signum: int, frame: Any) -> None:
            actor.stopped = True
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                raise SystemExit(1)

        signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (a threaded actor): Ray's handler stays as it is
        pass


def _actor_class(ray: Any) -> Any:
    key = id(ray)
    if key not in _ACTOR_CLASSES:
        _ACTOR_CLASSES[key] = ray.remote(EnvActor)
    return _ACTOR_CLASSES[key]


class RayBackend:
    """One env in one Ray actor; the factory travels pickled.

    Args:
        ray: the ``ray`` module, connected (:func:`~trl_env.envpool.ray_cluster.connect`).
        factory_bytes: ``pickle.dumps(env_factory)``.
        reuse: keep the env between episodes.
        options: the actor's ``.options(...)`` (:func:`~trl_env.envpool.ray_cluster.actor_options`).

    Attributes:
        node_id: the Ray node the actor runs on (None if it died while starting).
        pid: its process id there.
    """

    def __init__(self, ray: Any, factory_bytes: bytes, *, reuse: bool, options: dict[str, Any]) -> None:
        self._ray = ray
        self.actor = _actor_class(ray).options(**options).remote(factory_bytes, reuse)
        self.node_id: str | None = None
        self.pid: int | None = None
        self._shutdown_ref: Any = None
        # Wait until the actor is placed and has loaded the factory: never charged to a call's deadline. An actor
        # that dies while starting is found by the first call, as a child process is.
        try:
            self.node_id, self.pid = ray.get(self.actor.where.remote(), timeout=STARTUP_TIMEOUT_S)
        except Exception:  # noqa: S110 - the first call reports what happened to the actor
            pass

    def call(self, op: str, arg: Any, timeout: float | None) -> Outcome:
        """Run ``op`` in the actor; raise :class:`WorkerLost` after ``timeout`` s or when the actor dies."""
        ray = self._ray
        try:
            ref = self.actor.handle.remote(op, arg)
            ready, _ = ray.wait([ref], timeout=timeout)
            if not ready:
                raise WorkerLost("timeout", f"{op} took longer than {float(timeout or 0)} s")
            return ray.get(ref)
        except WorkerLost:
            raise
        except ray.exceptions.RayActorError as error:  # os._exit, a segfault, ray.kill, its node lost
            raise WorkerLost("crash", f"Ray actor died during {op}: {_first_line(error)}") from None
        except ray.exceptions.RayError as error:  # the object was lost with its node, Ray's own failure
            raise WorkerLost("crash", f"Ray failed during {op}: {_first_line(error)}") from None

    def begin_shutdown(self) -> None:
        """Ask an idle actor to close its env (``close()``)."""
        try:
            self._shutdown_ref = self.actor.handle.remote("shutdown", "")
        except Exception:  # Ray already shut down: the actor is gone with it
            self._shutdown_ref = None

    def finish_shutdown(self, deadline: float) -> None:
        """Wait until ``deadline`` (``time.monotonic()``) at most for :meth:`begin_shutdown` to finish."""
        if self._shutdown_ref is not None:
            try:
                self._ray.wait([self._shutdown_ref], timeout=max(0.0, deadline - time.monotonic()))
            except Exception:
                pass

    def kill(self, *, reap: bool = True) -> None:
        """``ray.kill`` the actor (its process dies at once, whatever it runs); a no-op once it or Ray is gone."""
        try:
            self._ray.kill(self.actor, no_restart=True)
        except Exception:  # already dead, or Ray shut down (which killed it)
            pass

    def reap(self) -> None:
        """Nothing to wait for: Ray reaps the actor's process."""


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__
