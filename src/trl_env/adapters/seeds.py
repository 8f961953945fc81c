"""How the adapters turn string seeds into the integers their packages want.

A seed that ends in a decimal number uses that number (``"17"``, ``"train-17"`` and
``"eval/17"`` all give 17), so seed streams such as ``train-0, train-1, ...`` walk through
a package's items in order; any other seed is hashed with SHA-256 (stable across processes
and Python versions, unlike ``hash()``).

Example:
    >>> seed_index("train-17"), seed_index("17"), seed_index("17", modulo=10)
    (17, 17, 7)
    >>> seed_index("abc") == seed_index("abc")
    True
"""

from __future__ import annotations

import hashlib
import importlib
import re
from typing import Any

from trl_env.errors import ConfigError, ConfigTypeError

_TRAILING_INT = re.compile(r"([0-9]+)$")


def seed_index(seed: str, modulo: int | None = None) -> int:
    """The integer a seed stands for: its trailing number, else a SHA-256 hash of it.

    Args:
        seed: the episode's seed.
        modulo: if given, the result is taken modulo this (e.g. a dataset's size).

    Returns:
        A non-negative integer (below ``modulo`` when given).

    Example:
        >>> seed_index("level2-5", modulo=4)
        1
    """
    if not isinstance(seed, str):
        raise ConfigTypeError(f"seeds are strings, got {type(seed).__name__} {seed!r}")
    match = _TRAILING_INT.search(seed.strip())
    if match:
        value = int(match.group(1))
    else:
        value = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    if modulo is not None:
        if modulo < 1:
            raise ConfigError(f"modulo must be >= 1, got {modulo}")
        value %= modulo
    return value


def resolve(spec: Any, what: str) -> Any:
    """``spec`` itself, or the object a ``"module:attribute"`` string names (for CLI kwargs).

    Args:
        spec: an object, or a ``"module:attribute"`` string.
        what: what the object is for, named in the error message.

    Returns:
        The object.

    Example:
        >>> resolve("json:dumps", "renderer").__name__
        'dumps'
        >>> resolve(len, "renderer") is len
        True
    """
    if not isinstance(spec, str):
        return spec
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigError(f"{what}: expected a callable or a 'module:attribute' string, got {spec!r}")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ConfigError(f"{what}: {module_name!r} has no attribute {attribute!r}") from None
    return obj
