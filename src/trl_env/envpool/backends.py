"""The parent's handle on one worker: a daemon thread or a child process that hosts an env.

Both backends run one call at a time: :meth:`call` sends it, waits at most ``timeout`` seconds
(the deadline starts here, when the worker starts the call) and returns the worker's outcome (a
dataclass of :mod:`trl_env.envpool.replies`, see :mod:`trl_env.envpool.host`) or raises
:class:`WorkerLost` on a timeout or a dead process. :meth:`kill` ends the worker (SIGKILL) or
abandons it (a thread cannot be killed: it exits if its call ever returns).

Process workers start with the ``forkserver`` method: the server process imports trl-env once,
single-threaded, and every worker is forked from it in milliseconds. ``spawn`` would re-import
trl-env (torch, transformers: seconds) in every worker, and ``fork`` copies a parent whose torch
and driver threads may hold locks at the moment of the fork (see benchmarks/env_isolation.py).
Workers never import the user's script: multiprocessing (every start method but fork) would make each
child re-import the parent's ``__main__`` (re-running an unguarded script, and paying a guarded one's
top-level imports of torch and transformers per worker), and an env factory sent to a worker never needs it
(:func:`~trl_env.envpool.isolation.pickle_for_worker` refuses one that does).

Example:
    >>> class Echo:
    ...     reward, alive = 0.0, True
    ...     def reset(self, seed):
    ...         return self, seed
    ...     def step(self, action):
    ...         return self, action
    >>> worker = ThreadBackend(Echo, reuse=False)
    >>> worker.call("reset", "hi", timeout=5.0)
    EnvReply(delta='hi', reward=0.0, alive=True)
    >>> worker.kill()
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.spawn
import multiprocessing.util  # noqa: F401  (its atexit hook must be registered before the pool's)
import queue
import signal
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from typing import Any

from trl_env.envpool.host import EnvHost
from trl_env.envpool.host_loops import child_main, thread_main
from trl_env.envpool.replies import Outcome
from trl_env.errors import TrlEnvError

START_METHOD = "forkserver"
_KILLED = ("killed",)
# multiprocessing's Popen.poll is not thread-safe for forkserver children: the exit code arrives as 8 bytes on
# a pipe, and a second thread polling at the same moment reads EOF and records 255 instead. The pool's closing
# thread, a worker's driver thread and Process.start() (which polls every child) can all poll at once, so each
# poll and start of ours holds this lock.
_POLL_LOCK = threading.Lock()

# Set while this thread starts one of our workers: the preparation data multiprocessing sends that child then
# leaves out the parent's main module, so the child never imports the user's script (see the module docstring).
_STARTING_WORKER = threading.local()
_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


# the stdlib's function (unwrapped, should this module be imported twice, e.g. reloaded)
_ORIGINAL_PREPARATION_DATA: Callable[[str], dict] = getattr(
    multiprocessing.spawn.get_preparation_data, "__wrapped__", multiprocessing.spawn.get_preparation_data
)


def _preparation_data_without_main(name: str) -> dict:
    data = _ORIGINAL_PREPARATION_DATA(name)
    if getattr(_STARTING_WORKER, "active", False):
        for key in _MAIN_KEYS:
            data.pop(key, None)
    return data


# multiprocessing has no public hook for what a child imports before it unpickles its target, so we wrap the one
# function that decides it; the wrapper changes nothing for any process but the workers started below.
_preparation_data_without_main.__wrapped__ = _ORIGINAL_PREPARATION_DATA  # type: ignore[attr-defined]
multiprocessing.spawn.get_preparation_data = _preparation_data_without_main


@contextlib.contextmanager
def _starting_worker():
    _STARTING_WORKER.active = True
    try:
        yield
    finally:
        _STARTING_WORKER.active = False


class WorkerLost(TrlEnvError):
    """The worker did not answer: ``kind`` is ``"timeout"`` or ``"crash"``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind, self.message = kind, message


class ThreadBackend:
    """A daemon thread hosting one env.

    Args:
        factory: builds the env inside the thread.
        reuse: keep the env between episodes (see :class:`~trl_env.envpool.host.EnvHost`).
    """

    def __init__(self, factory: Callable[[], Any], *, reuse: bool) -> None:
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._replies: queue.SimpleQueue = queue.SimpleQueue()
        host = EnvHost(factory, reuse=reuse)
        threading.Thread(
            target=thread_main, args=(host, self._requests, self._replies), daemon=True, name="trl-env-worker"
        ).start()

    def call(self, op: str, arg: Any, timeout: float | None) -> Outcome:
        """Run ``op`` in the thread; raise :class:`WorkerLost` after ``timeout`` seconds."""
        self._requests.put((op, arg))
        try:
            outcome = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise WorkerLost("timeout", f"{op} took longer than {float(timeout or 0)} s") from None
        if outcome is _KILLED:
            raise WorkerLost("crash", "worker was stopped")
        return outcome

    def begin_shutdown(self) -> None:
        """Ask an idle worker to close its env (``close()``) and stop."""
        self._requests.put(("shutdown", ""))

    def finish_shutdown(self, deadline: float) -> None:
        """Wait until ``deadline`` (``time.monotonic()``) at most for :meth:`begin_shutdown` to finish."""
        try:
            self._replies.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            pass

    def kill(self, *, reap: bool = True) -> None:
        """Abandon the thread: it stops after its current call, if that ever returns."""
        self._requests.put(None)
        self._replies.put(_KILLED)  # wakes a driver still waiting in call()

    def reap(self) -> None:
        """Nothing to wait for: an abandoned thread is a daemon."""


STARTUP_TIMEOUT_S = 300.0  # loading a factory's module (torch, a game engine) may be slow on a busy machine


class ProcessBackend:
    """A child process hosting one env; the factory travels pickled.

    Args:
        factory_bytes: ``pickle.dumps(env_factory)``.
        reuse: keep the env between episodes.
        context: the multiprocessing context (default: :func:`process_context`).
    """

    def __init__(self, factory_bytes: bytes, *, reuse: bool, context: Any = None) -> None:
        context = context or process_context()
        self._conn, child_conn = context.Pipe()
        # daemon=False: envs may start processes of their own; the pool kills this one at close or exit
        self.process = context.Process(
            target=child_main, args=(child_conn, factory_bytes, reuse), daemon=False, name="trl-env-worker"
        )
        with _POLL_LOCK, _starting_worker():
            self.process.start()
        child_conn.close()  # so that the pipe reads EOF when the child dies
        # Wait until the child has loaded the factory (importing its module can take seconds): start-up is
        # never charged to a call's deadline. A child that dies while loading is found by the first call.
        if self._conn in wait([self._conn, self.process.sentinel], STARTUP_TIMEOUT_S):
            try:
                self._conn.recv()  # ("ready",)
            except (EOFError, OSError):
                pass

    def call(self, op: str, arg: Any, timeout: float | None) -> Outcome:
        """Run ``op`` in the child; raise :class:`WorkerLost` after ``timeout`` s or when the child dies."""
        try:
            self._conn.send((op, arg))
        except OSError:
            raise self._died(op) from None
        ready = wait([self._conn, self.process.sentinel], timeout)
        if not ready:
            raise WorkerLost("timeout", f"{op} took longer than {float(timeout or 0)} s")
        if self._conn in ready:
            try:
                return self._conn.recv()
            except (EOFError, OSError):
                pass
        raise self._died(op)

    def _died(self, op: str) -> WorkerLost:
        code = self.exit_code(1.0)
        name = f" ({signal.Signals(-code).name})" if code is not None and -code in signal.valid_signals() else ""
        return WorkerLost("crash", f"worker died with exit code {code}{name} during {op}")

    def begin_shutdown(self) -> None:
        """Ask an idle worker to close its env (``close()``) and exit."""
        try:
            self._conn.send(("shutdown", ""))
        except OSError:
            pass

    def finish_shutdown(self, deadline: float) -> None:
        """Wait until ``deadline`` (``time.monotonic()``) at most for :meth:`begin_shutdown` to finish."""
        wait([self._conn, self.process.sentinel], max(0.0, deadline - time.monotonic()))

    def kill(self, *, reap: bool = True) -> None:
        """SIGKILL the child (no-op when it is gone) and, unless ``reap=False``, wait for it."""
        if self.exit_code() is None:
            self.process.kill()
        if reap:
            self.reap()

    def reap(self) -> None:
        """Wait (2 s at most) for the killed child to be gone and free the pipe."""
        self.exit_code(2.0)
        self._conn.close()

    def exit_code(self, timeout: float = 0.0) -> int | None:
        """The child's exit code (``-N``: killed by signal N) after waiting ``timeout`` s at most; None while it runs.

        Safe to call from several threads at once, unlike ``Process.join``/``Process.exitcode`` (see ``_POLL_LOCK``).
        """
        if timeout > 0:
            wait([self.process.sentinel], timeout)
        with _POLL_LOCK:
            return self.process.exitcode


def process_context(method: str = START_METHOD) -> Any:
    """The multiprocessing context for workers; for forkserver, preload trl-env in the server once.

    Example:
        >>> process_context().get_start_method()
        'forkserver'
    """
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        from multiprocessing import forkserver

        server = forkserver._forkserver  # private, but the only way to extend (not replace) the preload list
        if getattr(server, "_forkserver_pid", 1) is None:  # not started yet: the list still matters
            # "__main__" (the default entry) out: a server that preloads it would run the user's script itself
            modules = [name for name in getattr(server, "_preload_modules", []) if name not in ("__main__", __name__)]
            context.set_forkserver_preload([*modules, __name__])
    return context
