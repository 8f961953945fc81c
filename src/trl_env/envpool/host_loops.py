"""The loops that serve an :class:`~trl_env.envpool.host.EnvHost` inside a worker: a daemon thread or a child process.

Each loop takes ``(op, arg)`` requests, answers each with the host's outcome and ends after ``"shutdown"``.
:func:`thread_main` reads a queue (thread isolation); :func:`child_main` is the ``multiprocessing`` target of a
process worker: it loads the pickled factory itself and dies with its parent, even while an env call hangs.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
from typing import Any

from trl_env.envpool.host import EnvHost
from trl_env.envpool.values import describe


def thread_main(host: EnvHost, requests: Any, replies: Any) -> None:
    """A thread worker's loop: ``(op, arg)`` requests in, outcomes out.

    ``None`` means the pool abandoned this thread (its call timed out): once that call returns, if
    ever, the env is closed, since no one else can close it.
    """
    while (request := requests.get()) is not None:
        replies.put(host.handle(*request))
        if request[0] == "shutdown":
            return
    host.handle("shutdown", "")


def child_main(conn: Any, factory_bytes: bytes, reuse: bool) -> None:
    """A process worker's loop (the ``multiprocessing`` target): like :func:`thread_main` over a pipe.

    Ignores SIGINT (a Ctrl-C stops the parent, which then kills this process) and dies with its
    parent even while an env call hangs.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    try:
        host = EnvHost(pickle.loads(factory_bytes), reuse=reuse, pickled_forks=True)
    except BaseException as error:
        message = f"could not load env_factory in the worker: {describe(error)}"
        host = EnvHost(None, reuse=reuse, load_error=message, pickled_forks=True)
    conn.send(("ready",))  # the parent starts counting call deadlines only now
    while True:
        try:
            op, arg = conn.recv()
        except (EOFError, OSError):  # the parent closed the pipe or died
            return
        conn.send(host.handle(op, arg))
        if op == "shutdown":
            return


def _die_with_parent() -> None:
    """Exit when the parent process dies, even if an env call never returns.

    A watchdog thread waits on the parent's sentinel; on Linux ``PR_SET_PDEATHSIG`` also kills this
    process when its forking parent (the forkserver, which exits with the pool's process) goes away.
    """
    import multiprocessing
    from multiprocessing.connection import wait

    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        sentinel = parent.sentinel
        threading.Thread(target=lambda: (wait([sentinel]), os._exit(0)), daemon=True).start()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except Exception:  # not Linux: the watchdog thread alone
        pass
