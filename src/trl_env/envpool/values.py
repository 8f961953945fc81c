"""What env code hands back, checked and converted in the worker: rewards, alive flags, metrics, errors.

Game code returns numpy and torch scalars as often as Python numbers; these are accepted and converted
here, so the parent only ever sees plain ``float``/``bool`` values or a contract error naming the problem.

Example:
    >>> import numpy as np
    >>> to_reward(np.float32(0.5)), to_alive(np.bool_(True)), describe(ValueError("bad seed"))
    (0.5, True, 'ValueError: bad seed')
"""

from __future__ import annotations

import math
import numbers

from trl_env.core import HistoryRewrite


def to_text(value: str) -> str:
    """``value`` as valid Unicode: a lone surrogate (an env echoing a ``"\\ud800"`` JSON escape) becomes U+FFFD,
    which the tokenizer can encode; a surrogate pair becomes the character it stands for.

    Example:
        >>> to_text("ok \\ud800 \\ud83d\\ude00") == "ok \\ufffd \\U0001f600"
        True
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def to_reward(value: object) -> float | None:
    """``value`` as a finite float, or None when it is not one (bools are not rewards).

    Accepts int/float/``numbers.Real``, numpy scalars and 0-d numpy arrays / torch tensors.

    Example:
        >>> import numpy as np
        >>> to_reward(np.float32(0.5)), to_reward(3), to_reward(True), to_reward(float("nan"))
        (0.5, 3.0, None, None)
    """
    value = _unwrap(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def to_alive(value: object) -> bool | None:
    """``value`` as a bool when it is a bool or a numpy/torch 0-d bool, else None.

    Example:
        >>> import numpy as np
        >>> to_alive(np.bool_(False)), to_alive(True), to_alive(1)
        (False, True, None)
    """
    value = _unwrap(value)
    return value if isinstance(value, bool) else None


def _unwrap(value: object) -> object:
    """numpy scalars and 0-d arrays/tensors -> the Python scalar inside (duck-typed: no numpy/torch import)."""
    if isinstance(value, int | float):  # also np.float64, a float subclass: nothing to unwrap
        return value
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0:
        try:
            return item()
        except Exception:  # a 0-d object that cannot give its item: leave it to be rejected
            return value
    return value


def describe(error: BaseException) -> str:
    """``"ValueError: bad seed"``; the class name alone when the message is empty."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def check_metrics(raw: object, where: str) -> tuple[dict[str, float] | None, str | None]:
    """A ``metrics()`` result as ``(dict[str, float] | None, None)``, or ``(None, contract-error message)``."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        return None, f"{where} returned {type(raw).__name__}, expected dict[str, float] or None"
    metrics = {}
    for key, value in raw.items():
        number = to_reward(value)
        if not isinstance(key, str) or number is None:
            return None, f"{where} returned {{{key!r}: {value!r}}}, expected str keys and finite floats"
        metrics[key] = number
    return metrics, None


def check_history_rewrite(raw: object, where: str) -> tuple[HistoryRewrite | None, str | None]:
    """An env's ``history_rewrite`` as ``(HistoryRewrite | None, None)``, or ``(None, contract-error message)``.

    Example:
        >>> check_history_rewrite("a summary", "Env.step")[1]
        "Env.step: history_rewrite is 'a summary', expected HistoryRewrite(messages, reason[, tools])"
        >>> check_history_rewrite(([{"role": "user", "content": "hi"}], "summarised"), "Env.step")[0].reason
        'summarised'
    """
    if raw is None:
        return None, None
    ok = isinstance(raw, tuple) and len(raw) in (2, 3) and all(isinstance(m, dict) for m in raw[0])
    tools = raw[2] if ok and len(raw) == 3 else None
    if not ok or (tools is not None and not all(isinstance(t, dict) for t in tools)):
        return None, f"{where}: history_rewrite is {raw!r:.80}, expected HistoryRewrite(messages, reason[, tools])"
    return HistoryRewrite(tuple(raw[0]), to_text(str(raw[1])), None if tools is None else tuple(tools)), None
