"""Copying an env in mid-episode, for tree rollouts: its own ``fork()``, else ``copy.deepcopy`` (or pickle).

:func:`fork_env` gives an independent env in the same state (thread isolation hands that object to
another worker thread); :func:`fork_bytes` gives it pickled, to travel to another child process
(process isolation). An env that cannot be copied (it holds a process, a socket, a lock...) gets a
:class:`ForkError` naming its class, the cause and the fix: a ``fork()`` method
(:class:`~trl_env.core.Forkable`). An exception raised by the env's own ``fork()`` is not wrapped:
the pool reports it as a fault of the call, like one raised by ``step``.

Example:
    >>> class Tally:
    ...     reward, alive = 0.0, True
    ...     def __init__(self):
    ...         self.seen = []
    ...     def reset(self, seed):
    ...         return self, seed
    ...     def step(self, action):
    ...         self.seen.append(action)
    ...         return self, action
    >>> env = Tally()
    >>> copy_ = fork_env(env)
    >>> _ = copy_.step("x")
    >>> copy_.seen, env.seen
    (['x'], [])
    >>> import threading
    >>> env.lock = threading.Lock()
    >>> fork_env(env)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trl_env.envpool.forking.ForkError: cannot fork Tally: copy.deepcopy failed (TypeError: cannot pickle ...
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

from trl_env.core import Env, Forkable
from trl_env.errors import TrlEnvError

__all__ = ["ForkError", "fork_bytes", "fork_env"]

ADVICE = (
    "give the env a fork() method that returns an independent copy (trl_env.core.Forkable), "
    "e.g. one that starts its own process or connection"
)


class ForkError(TrlEnvError, TypeError):
    """An env that cannot be copied; the message names its class, the cause and the fix."""


def fork_env(env: Env) -> Env:
    """An independent copy of ``env`` in its current state: ``env.fork()`` when it has one, else ``copy.deepcopy``.

    Raises:
        ForkError: ``deepcopy`` failed, or ``fork()`` returned something that is not an env.
    """
    if isinstance(env, Forkable):
        return _checked(env, env.fork())
    try:
        return copy.deepcopy(env)
    except Exception as error:
        message = f"cannot fork {type(env).__name__}: copy.deepcopy failed ({_describe(error)}); {ADVICE}"
        raise ForkError(message) from error


def fork_bytes(env: Env) -> bytes:
    """``env`` copied (its ``fork()``, or as it is) and pickled, to be loaded in another process.

    Pickling is itself a deep copy, so an env without ``fork()`` is pickled as it is, not deep-copied first.

    Example:
        >>> from examples.guess_number import GuessNumberEnv
        >>> env, _ = GuessNumberEnv().reset("11")
        >>> env, _ = env.step("8")
        >>> copied, _ = pickle.loads(fork_bytes(env)).step("11")
        >>> copied.reward > env.reward, env.alive
        (True, True)

    Raises:
        ForkError: the env (or its ``fork()``'s copy) cannot be pickled, or ``fork()`` returned a non-env.
    """
    copied: Any = _checked(env, env.fork()) if isinstance(env, Forkable) else env
    try:
        return pickle.dumps(copied)
    except Exception as error:
        made = f"the copy its fork() returned ({type(copied).__name__})" if copied is not env else "it"
        raise ForkError(
            f"cannot fork {type(env).__name__} to another process: pickling {made} failed ({_describe(error)}); "
            f"{ADVICE} that pickles, or use isolation='thread'"
        ) from error


def _checked(env: Any, copied: Any) -> Env:
    if copied is env or not isinstance(copied, Env):
        what = "the env itself" if copied is env else f"{type(copied).__name__}, not an env (no reset, step...)"
        raise ForkError(f"{type(env).__name__}.fork() returned {what}; it must return an independent copy")
    return copied


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
