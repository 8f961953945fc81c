"""Naming an env factory, pickling it for a worker process, and choosing where its envs run
(``env_isolation="auto"``).

Example:
    >>> factory_name(functools.partial(dict, a=1))
    'dict'
"""

from __future__ import annotations

import functools
import io
import os
import pickle
import sys
import types
import warnings
from collections.abc import Callable
from typing import Literal

from trl_env.core import Env
from trl_env.errors import ConfigTypeError

Isolation = Literal["thread", "process", "ray"]
"""Where a pool's envs run: worker threads, worker processes or Ray actors."""


def factory_name(env_factory: Callable[..., object]) -> str:
    """The name errors use for an env factory (the class or function; a partial's function).

    Example:
        >>> factory_name(functools.partial(dict, a=1))
        'dict'
    """
    while isinstance(env_factory, functools.partial):
        env_factory = env_factory.func
    return getattr(env_factory, "__qualname__", None) or type(env_factory).__name__


class _MainFinder(pickle.Pickler):
    """A pickler that notes the first object it pickles by reference to ``__main__``."""

    def __init__(self, file: io.BytesIO) -> None:
        super().__init__(file, protocol=pickle.DEFAULT_PROTOCOL)
        self.main_object: object | None = None

    def reducer_override(self, obj: object) -> object:
        if self.main_object is None and isinstance(obj, type | types.FunctionType):
            if getattr(obj, "__module__", None) == "__main__":
                self.main_object = obj
        return NotImplemented  # pickle it as usual


def pickle_for_worker(env_factory: Callable[..., object]) -> bytes:
    """``pickle.dumps(env_factory)`` for a worker process, which imports the factory's module but never the
    script being run (``__main__``).

    Raises:
        ConfigTypeError: the factory cannot be pickled, or it (or an argument bound to it) is defined in ``__main__``;
            the message says how to make it sendable.

    Example:
        >>> pickle.loads(pickle_for_worker(functools.partial(dict, a=1)))()
        {'a': 1}
        >>> pickle_for_worker(lambda: None)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigTypeError: env_factory <lambda> cannot go to a worker process: it is not picklable ...
    """
    name = factory_name(env_factory)
    advice = (
        "define it (the env class or factory function, and any class it is given) at module level in a module "
        "of its own and import it from there, or pass env_isolation='thread'"
    )
    buffer = io.BytesIO()
    finder = _MainFinder(buffer)
    try:
        finder.dump(env_factory)
    except Exception as error:
        message = f"env_factory {name} cannot go to a worker process: it is not picklable ({error}); {advice}"
        raise ConfigTypeError(message) from error
    if finder.main_object is not None:
        where = getattr(finder.main_object, "__qualname__", repr(finder.main_object))
        raise ConfigTypeError(
            f"env_factory {name} cannot go to a worker process: {where} is defined in the script being run "
            f"(__main__), which workers do not import; {advice}"
        )
    return buffer.getvalue()


def place_factory(env_factory: Callable[[], Env], isolation: str) -> tuple[Isolation, bytes | None]:
    """Where a factory's envs run and, for worker processes, the factory pickled: the one pickle it ever gets.

    ``"process"`` pickles it with :func:`pickle_for_worker` (which refuses a factory a worker could not load);
    ``"ray"`` pickles it the same way (a Ray actor loads it like a child process);
    ``"thread"`` needs no pickle; ``"auto"`` (``env_isolation``'s default) is ``"process"`` when the factory can
    go to a child process (by reference to a module other than the script being run), else ``"thread"`` with a
    warning attributed to the first caller outside trl-env (the user's script).

    Args:
        env_factory: the pool's factory (callable: :class:`~trl_env.envpool.pool.EnvPool` checks it first).
        isolation: ``"process"``, ``"ray"``, ``"thread"`` or ``"auto"``.

    Returns:
        The isolation, and the pickled factory for ``"process"`` and ``"ray"`` (None for ``"thread"``).

    Raises:
        ConfigTypeError: ``"process"`` or ``"ray"`` and the factory cannot go to a worker process.

    Example:
        >>> place_factory(dict, "auto")[0], place_factory(dict, "thread")
        ('process', ('thread', None))
        >>> place_factory(lambda: None, "auto")
        ('thread', None)
    """
    if isolation == "thread":
        return "thread", None
    if isolation in ("process", "ray"):
        return isolation, pickle_for_worker(env_factory)  # type: ignore[return-value]
    try:
        return "process", pickle_for_worker(env_factory)
    except ConfigTypeError as error:
        reason = str(error).split(": ", 1)[-1].split("; ")[0]
    warnings.warn(
        f"the env factory {factory_name(env_factory)} cannot go to a worker process ({reason}), so its envs run in "
        "threads: a hung call is abandoned, not killed, and a crash in env code ends the run. Define it in a module "
        "of its own and import it, or set env_isolation='thread' to silence this.",
        stacklevel=_first_caller_outside_trl_env(),
    )
    return "thread", None


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # .../trl_env/


def _first_caller_outside_trl_env() -> int:
    """The ``stacklevel`` that makes a warning name the first frame outside trl-env: the user's call, however
    many trl-env layers (``rollout``, ``RolloutEngine.run``, the trainer's rollout function) lie between."""
    frame, level = sys._getframe(1), 1  # level 1: the function that calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    return level
