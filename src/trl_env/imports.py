"""Import ``module:attribute`` strings given on the command line."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def import_object(spec: str) -> Any:
    """Import ``"package.module:Name"`` (the current directory is importable, as with ``python -m``).

    Example:
        >>> import_object("json:dumps").__name__
        'dumps'
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected MODULE:NAME, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    try:
        return getattr(module, attribute)
    except AttributeError:
        raise ValueError(f"module {module_name!r} has no attribute {attribute!r}") from None
