"""Check ``--env-kwargs`` against the env factory's signature before any episode runs.

A class is only called when the first episode starts (in an env worker), so a misspelt keyword would
otherwise surface as every episode failing. The check binds the keywords to the signature of the class's
``__init__``, a function, a ``functools.partial`` or a callable object alike.

Example:
    >>> from examples.guess_number import GuessNumberEnv
    >>> check_factory_kwargs(GuessNumberEnv, {"high": 8}, "examples.guess_number:GuessNumberEnv")
    >>> check_factory_kwargs(GuessNumberEnv, {"hihg": 8}, "examples.guess_number:GuessNumberEnv")
    Traceback (most recent call last):
    ...
    trl_env.cli.usage.UsageError: --env-kwargs do not fit examples.guess_number:GuessNumberEnv: unexpected \
keyword argument 'hihg' (did you mean 'high'?); it takes ...
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from typing import Any

from trl_env.cli.usage import UsageError


def check_factory_kwargs(factory: Callable[..., Any], kwargs: dict[str, Any], spec: str) -> None:
    """Raise :class:`~trl_env.cli.usage.UsageError` when ``factory(**kwargs)`` cannot bind.

    Args:
        factory: the imported class, function, partial or callable object.
        kwargs: the parsed ``--env-kwargs``.
        spec: the ``MODULE:FACTORY`` text, for the message.

    Returns:
        None; a factory whose signature cannot be read (some builtins) is not checked.
    """

    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(**kwargs)
    except TypeError as error:
        problem = str(error).replace("got an ", "")
        names = [p.name for p in signature.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        unknown = [key for key in kwargs if key not in signature.parameters]
        close = difflib.get_close_matches(unknown[0], names, n=1) if unknown else []
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        takes = ", ".join(str(p) for p in signature.parameters.values()) or "no arguments"
        raise UsageError(f"--env-kwargs do not fit {spec}: {problem}{hint}; it takes ({takes})") from None
