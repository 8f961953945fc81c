"""Naming an env factory, and choosing where its envs run (``env_isolation="auto"``).

Example:
    >>> factory_name(functools.partial(dict, a=1))
    'dict'
"""

from __future__ import annotations

import functools
import pickle
import warnings
from collections.abc import Callable

from trl_env.core import Env


def factory_name(env_factory: Callable[..., object]) -> str:
    """The name errors use for an env factory (the class or function; a partial's function).

    Example:
        >>> factory_name(functools.partial(dict, a=1))
        'dict'
    """
    while isinstance(env_factory, functools.partial):
        env_factory = env_factory.func
    return getattr(env_factory, "__qualname__", None) or type(env_factory).__name__


def choose_isolation(env_factory: Callable[[], Env], isolation: str) -> str:
    """The isolation an ``"auto"`` config gets: ``"process"`` when the factory can be sent to a child
    process by reference (defined at module level in an importable module other than the script being
    run: a worker would re-run an unguarded script), else ``"thread"`` with a warning.

    Example:
        >>> choose_isolation(dict, "auto"), choose_isolation(lambda: None, "auto")
        ('process', 'thread')
    """
    if isinstance(isolation, str) and isolation != "auto":
        return isolation
    try:
        pickle.dumps(env_factory)
    except Exception:
        sendable = False
    else:
        target = env_factory
        while isinstance(target, functools.partial):
            target = target.func
        sendable = getattr(target, "__module__", None) != "__main__"
    if sendable:
        return "process"
    warnings.warn(
        f"the env factory {factory_name(env_factory)} cannot be sent to a worker process (it is not defined at "
        "module level in an importable module other than the script being run), so its envs run in threads: a hung "
        "call is abandoned, not killed, and a crash in env code ends the run. Define it in a module of its own, or "
        "set env_isolation='thread' to silence this.",
        stacklevel=4,
    )
    return "thread"
