"""Naming an env factory, pickling it for a worker process, and choosing where its envs run
(``env_isolation="auto"``).

Example:
    >>> factory_name(functools.partial(dict, a=1))
    'dict'
"""

from __future__ import annotations

import functools
import io
import pickle
import types
import warnings
from collections.abc import Callable

from trl_env.core import Env
from trl_env.errors import ConfigTypeError


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


def choose_isolation(env_factory: Callable[[], Env], isolation: str) -> str:
    """The isolation an ``"auto"`` config gets: ``"process"`` when :func:`pickle_for_worker` can send the
    factory to a child process (by reference to a module other than the script being run), else ``"thread"``
    with a warning.

    Example:
        >>> choose_isolation(dict, "auto"), choose_isolation(lambda: None, "auto")
        ('process', 'thread')
    """
    if isinstance(isolation, str) and isolation != "auto":
        return isolation
    try:
        pickle_for_worker(env_factory)
    except ConfigTypeError as error:
        reason = str(error).split(": ", 1)[-1].split("; ")[0]
    else:
        return "process"
    warnings.warn(
        f"the env factory {factory_name(env_factory)} cannot go to a worker process ({reason}), so its envs run in "
        "threads: a hung call is abandoned, not killed, and a crash in env code ends the run. Define it in a module "
        "of its own and import it, or set env_isolation='thread' to silence this.",
        stacklevel=4,
    )
    return "thread"
