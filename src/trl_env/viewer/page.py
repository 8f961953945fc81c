"""One self-contained HTML page for episode records: no network, no server, opens from disk.

The records are embedded as JSON in a ``<script type="application/json">`` element in a compact
form (token kinds as one string, logprobs rounded, identical prompts stored once); the inlined
script (``assets/page.js``) draws the summary, lists the episodes virtually (only the rows on
screen exist) and renders an episode's tokens only when it is opened.

Example:
    >>> import tempfile, os
    >>> path = write_page([{"seed": "a", "reward": 1.0}], os.path.join(tempfile.mkdtemp(), "v.html"))
    >>> text = path.read_text()
    >>> text.startswith("<!DOCTYPE html>"), "http" in text.split("<script")[0]
    (True, False)
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from trl_env.errors import BackendError, DataError

# Keys the page lays out itself; any other key of a record is shown in the episode's "extra" table.
KNOWN_KEYS = {
    "seed", "step", "reward", "stop_reason", "error", "num_turns", "success", "turn_rewards", "prompt_text",
    "prompt_ids", "completion_ids", "env_mask", "logprobs", "token_texts", "segments", "turns", "parse_failures",
    "text",
}  # fmt: skip
# a token's kind in the page's kind string: tool results are env text (mask 0), shown as such
SOURCES = {"model": "1", "env": "0", "tool": "0", "turn_end": "2"}
TURN_KEYS = ("reasoning", "action", "parsed_ok", "stopped", "observation")  # a turn's completion is in the tokens
SCRIPTS = ("summary.js", "episode.js", "app.js")  # inlined in this order: helpers first, the app last
LOGPROB_DIGITS = 3  # 0.001 nats: far below what a colour or a tooltip shows; keeps 10k-episode pages small


def write_page(records: Iterable[Mapping[str, Any]], path: str | Path, *, title: str = "trl-env transcripts") -> Path:
    """Write the viewer page for ``records`` (see :func:`trl_env.viewer.episode_record`) to ``path``.

    Missing keys are shown as unknown; keys the page does not know are shown as they are.

    Args:
        records: episode records, e.g. from :func:`trl_env.viewer.read_records`.
        path: the ``.html`` file to write (its folder is created).
        title: the page's title.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        ValueError: naming the record (index and seed) and the field that is malformed.

    Example:
        >>> import tempfile, os
        >>> bad = {"seed": "a", "env_mask": [1], "completion_ids": []}
        >>> write_page([bad], os.path.join(tempfile.mkdtemp(), "v.html"))
        Traceback (most recent call last):
        ...
        trl_env.errors.DataError: record 0 (seed 'a'): completion_ids has 0 entries but env_mask has 1
    """
    path = Path(path)
    prompts: dict[str, int] = {}
    episodes = [page_episode(record, index, prompts) for index, record in enumerate(records)]
    data = {"title": title, "prompts": list(prompts), "episodes": episodes}
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    # "<" only occurs inside JSON strings, where \u003c means the same; no "</script>" can end the element early
    payload = payload.replace("<", "\\u003c")
    page = TEMPLATE.format(
        title=html.escape(title), css=_asset("page.css"), js="\n".join(_asset(name) for name in SCRIPTS), data=payload
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def page_episode(record: Mapping[str, Any], index: int, prompts: dict[str, int]) -> dict[str, Any]:
    """The compact page form of one record; ``prompts`` maps prompt texts to their index (filled in).

    Example:
        >>> prompts = {}
        >>> r = {"seed": "a", "prompt_text": "hi", "completion_ids": [5, 6], "env_mask": [1, 0],
        ...      "logprobs": [-0.12345, 0.0], "token_texts": ["x", "y"]}
        >>> e = page_episode(r, 0, prompts)
        >>> e["k"], e["lp"], e["p"], prompts
        ('10', [-0.123, 0], 0, {'hi': 0})
    """
    if not isinstance(record, Mapping):
        raise DataError(f"record {index}: expected a dict, got {type(record).__name__}")
    where = f"record {index} (seed {record.get('seed')!r})"
    ids = _int_list(record, "completion_ids", where)
    n = len(ids)
    if n and record.get("env_mask") is None:
        raise DataError(f"{where}: has completion_ids but no env_mask")
    mask = _int_list(record, "env_mask", where, n)
    if not set(mask) <= {0, 1}:
        raise DataError(f"{where}: env_mask holds values other than 0 and 1")
    logprobs = _logprobs(_list(record, "logprobs", where, n), where) or [0] * n
    texts = _list(record, "token_texts", where, n) if "token_texts" in record else [f"⟨{i}⟩" for i in ids]
    if not set(map(type, texts)) <= {str}:
        raise DataError(f"{where}: token_texts must all be strings")
    kinds = ["1" if m else "0" for m in mask]
    for s, segment in enumerate(record.get("segments") or []):
        source = segment.get("source") if isinstance(segment, Mapping) else None
        if source not in SOURCES:
            raise DataError(f"{where}: segments[{s}] has source {source!r}; expected one of {sorted(SOURCES)}")
        start, end = segment.get("start"), segment.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= n):
            raise DataError(f"{where}: segments[{s}] spans {start}..{end}, outside the {n} completion tokens")
        if source == "turn_end":
            kinds[start:end] = ["2"] * (end - start)
    prompt = record.get("prompt_text")
    episode = {
        "seed": "" if record.get("seed") is None else str(record.get("seed")),
        "step": _optional_int(record.get("step"), f"{where}: step"),
        "reward": _number(record.get("reward"), f"{where}: reward"),
        "stop_reason": record.get("stop_reason"),
        "error": record.get("error"),
        "num_turns": record.get("num_turns", len(record.get("turns") or [])),
        "success": record.get("success"),
        "turn_rewards": [_number(r, f"{where}: turn_rewards") for r in record.get("turn_rewards") or []] or None,
        "parse_failures": record.get("parse_failures"),
        "p": None if prompt is None else prompts.setdefault(str(prompt), len(prompts)),
        "pn": len(record.get("prompt_ids") or []),
        "tt": texts,
        "ids": ids,
        "lp": logprobs,
        "k": "".join(kinds),
        "turns": [_turn(turn, f"{where}: turns[{t}]") for t, turn in enumerate(_list(record, "turns", where))],
        "extra": {key: _jsonable(value) for key, value in record.items() if key not in KNOWN_KEYS},
    }
    if not n and isinstance(record.get("text"), str):  # an older transcript without tokens: show its text
        episode["text"] = record["text"]
    return episode


def _list(record: Mapping[str, Any], key: str, where: str, length: int | None = None) -> list[Any]:
    value = record.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataError(f"{where}: {key} must be a list, got {type(value).__name__}")
    if length is not None and len(value) != length:
        raise DataError(f"{where}: completion_ids has {length} entries but {key} has {len(value)}")
    return value


def _int_list(record: Mapping[str, Any], key: str, where: str, length: int | None = None) -> list[int]:
    value = _list(record, key, where, length)
    if not set(map(type, value)) <= {int}:  # set(map(...)) runs in C: 10,000 episodes' tokens stay fast to check
        raise DataError(f"{where}: {key} must hold integers only")
    return value


def _logprobs(values: list[Any], where: str) -> list[float | int]:
    """Logprobs rounded to ``LOGPROB_DIGITS`` (0 as the int 0, the shortest JSON); a bad one is named."""
    try:
        rounded = [round(x, LOGPROB_DIGITS) or 0 for x in values]
        total = math.fsum(rounded)
    except TypeError:
        total = math.nan
    if math.isfinite(total) and not set(map(type, values)) & {bool}:
        return rounded
    for i, x in enumerate(values):  # the slow path only finds which one is wrong
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x):
            raise DataError(f"{where}: logprobs[{i}] must be a finite number, got {x!r}")
    return rounded


def _number(value: Any, where: str) -> float | None:
    """A finite float, None for missing or non-finite values (JSON has no NaN)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{where} must be a number, got {value!r}")
    return float(value) if math.isfinite(value) else None


def _optional_int(value: Any, where: str) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    raise DataError(f"{where} must be an integer or null, got {value!r}")


def _turn(turn: Any, where: str) -> dict[str, Any]:
    if not isinstance(turn, Mapping):
        raise DataError(f"{where} must be an object, got {type(turn).__name__}")
    return {key: _jsonable(turn.get(key)) for key in TURN_KEYS if turn.get(key) not in (None, "")}


def _jsonable(value: Any) -> Any:
    """``value`` with non-finite floats as None and unknown objects as their ``str``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, str | int | bool):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return str(value)


def _asset(name: str) -> str:
    text = resources.files("trl_env.viewer").joinpath("assets", name).read_text(encoding="utf-8")
    if "</script" in text.lower() or "</style" in text.lower():
        raise BackendError(f"viewer asset {name} contains a closing tag and cannot be inlined")
    return text


TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{css}
</style>
</head>
<body>
<div id="app"><p class="loading">Loading episodes…</p></div>
<script type="application/json" id="trl-env-data">{data}</script>
<script>
{js}
</script>
</body>
</html>
"""
