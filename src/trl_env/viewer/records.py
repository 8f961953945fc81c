"""Episode records for the transcript viewer: build them from episodes, read them from JSONL files.

A record is one JSON object per episode (see :func:`episode_record` for the keys). Records carry
the exact token sequence TRL trains on (``completion_ids``, ``env_mask``, ``logprobs``) plus the
text of every completion token, so a page can show which tokens the model sampled.

Example:
    >>> from trl_env import Episode
    >>> record = episode_record(Episode(seed="s", prompt_ids=[1], prompt_text="hi"), None, step=3)
    >>> record["seed"], record["step"], record["token_texts"]
    ('s', 3, [])
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trl_env.errors import DataError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from trl_env import Episode

REPLACEMENT = "\ufffd"  # what a decoder prints for an incomplete UTF-8 sequence


def token_texts(ids: Sequence[int], tokenizer: PreTrainedTokenizerBase) -> list[str]:
    """The text of each token, such that ``"".join(result) == tokenizer.decode(ids)``.

    Decoding is incremental: a token's text is what it adds to the decoded text of the tokens
    before it. A character split over several tokens (byte-level BPE splits emoji and CJK
    characters) is attached whole to the token that completes it; the tokens before get ``""``,
    never a pair of ``"\\ufffd"``. A window of recent tokens keeps this linear in ``len(ids)``;
    if a tokenizer's decoding is not additive over that window (e.g. a SentencePiece tokenizer
    that drops a leading space), the exact quadratic form is used instead.

    Args:
        ids: token ids.
        tokenizer: the tokenizer that produced them (anything with ``decode``).

    Returns:
        One string per id.

    Example:
        >>> class Bytes:  # a byte-level "tokenizer": each id is one UTF-8 byte
        ...     def decode(self, ids, **kwargs):
        ...         return bytes(ids).decode("utf-8", errors="replace")
        >>> token_texts(list("a😀b".encode()), Bytes())
        ['a', '', '', '', '😀', 'b']
    """
    ids = list(ids)
    full = _decode(tokenizer, ids)
    texts = _windowed(ids, tokenizer)
    if "".join(texts) == full:
        return texts
    return _from_prefixes(ids, tokenizer, full)


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _windowed(ids: list[int], tokenizer: Any) -> list[str]:
    """vLLM-style incremental detokenization: decode a short window, emit what is stable."""
    texts: list[str] = []
    prefix, read = 0, 0  # ids[prefix:read] is the context already emitted; ids[read:] is pending
    for i in range(len(ids)):
        before = _decode(tokenizer, ids[prefix:read])
        after = _decode(tokenizer, ids[prefix : i + 1])
        if len(after) > len(before) and not after.endswith(REPLACEMENT):
            texts.append(after[len(before) :])
            prefix, read = read, i + 1
        else:
            texts.append("")  # an incomplete character: wait for the token that completes it
    if read < len(ids) and texts:  # a trailing incomplete character stays with the last token
        texts[-1] += _decode(tokenizer, ids[prefix:])[len(_decode(tokenizer, ids[prefix:read])) :]
    return texts


def _from_prefixes(ids: list[int], tokenizer: Any, full: str) -> list[str]:
    """Exact form: token i adds decode(ids[:i+1]) minus decode(ids[:i]); the last token takes the rest."""
    texts: list[str] = []
    emitted = ""
    for i in range(len(ids)):
        text = _decode(tokenizer, ids[: i + 1]).rstrip(REPLACEMENT)
        if i == len(ids) - 1 or not text.startswith(emitted) or not full.startswith(text):
            texts.append("")
            continue
        texts.append(text[len(emitted) :])
        emitted = text
    if texts:
        texts[-1] = full[len(emitted) :] if full.startswith(emitted) else full
        if not full.startswith(emitted):  # decoding is not prefix-stable at all: show it on the last token
            texts[:-1] = [""] * (len(texts) - 1)
    return texts


def episode_record(
    episode: Episode,
    tokenizer: PreTrainedTokenizerBase | None,
    *,
    step: int | None = None,
    success: bool | None = None,
    turn_rewards: Sequence[float | None] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The viewer's JSON-ready record of one episode.

    Args:
        episode: a finished :class:`trl_env.Episode`.
        tokenizer: the tokenizer of the episode's ids (for ``token_texts``); None only for an
            episode without completion tokens.
        step: the training step, or None (evaluation).
        success: whether the episode solved its task; default: the env's ``success`` metric, if any.
        turn_rewards: one reward (or None) per turn; default: the turns' own rewards.
        extra: more keys (env metrics, ...) merged into the record; they may not replace the
            record's own keys.

    Returns:
        A dict with keys ``seed, step, reward, stop_reason, error, num_turns, success,
        turn_rewards, prompt_text, prompt_ids, completion_ids, env_mask, logprobs, token_texts,
        segments, turns, parse_failures``, under ``history="template"``/``"window"`` ``turn_samples`` (each
        turn's own prompt text; the page shows it in the episode's extra table), and the ``extra`` ones.

    Example:
        >>> from trl_env import Episode
        >>> e = Episode(seed="s", prompt_ids=[1], prompt_text="p")
        >>> episode_record(e, None, turn_rewards=[0.5])
        Traceback (most recent call last):
        ...
        trl_env.errors.DataError: episode 's': 1 turn_rewards for 0 turns
    """
    if turn_rewards is not None and len(turn_rewards) != episode.num_turns:
        raise DataError(f"episode {episode.seed!r}: {len(turn_rewards)} turn_rewards for {episode.num_turns} turns")
    if episode.completion_ids and tokenizer is None:
        raise DataError(f"episode {episode.seed!r}: a tokenizer is needed to decode its completion tokens")
    if turn_rewards is None:
        turn_rewards = [turn.reward for turn in episode.turns]
    if success is None and episode.metrics is not None and "success" in episode.metrics:
        success = bool(episode.metrics["success"])
    record: dict[str, Any] = {
        "seed": episode.seed,
        "step": step,
        "reward": episode.reward,
        "stop_reason": str(episode.stop_reason),
        "error": episode.error,
        "num_turns": episode.num_turns,
        "success": success,
        "turn_rewards": None if turn_rewards is None else [None if r is None else float(r) for r in turn_rewards],
        "prompt_text": episode.prompt_text,
        "prompt_ids": list(episode.prompt_ids),
        "completion_ids": list(episode.completion_ids),
        "env_mask": list(episode.env_mask),
        "logprobs": [float(x) for x in episode.logprobs],
        "token_texts": token_texts(episode.completion_ids, tokenizer) if episode.completion_ids else [],
        "segments": [{"start": s.start, "end": s.end, "source": str(s.kind), "text": s.text} for s in episode.segments],
        "turns": [{**dataclasses.asdict(turn), "span": list(turn.span)} for turn in episode.turns],
        "metrics": episode.metrics,
        "parse_failures": episode.parse_failures,
    }
    if episode.turn_samples:  # history="template"/"window": each turn was trained on its own prompt; show it
        record["turn_samples"] = [
            {
                "turn": sample.turn,
                "prompt_tokens": len(sample.prompt_ids),
                "completion_tokens": len(sample.completion_ids),
                "prompt_text": tokenizer.decode(sample.prompt_ids, clean_up_tokenization_spaces=False)
                if tokenizer is not None
                else None,
            }
            for sample in episode.turn_samples
        ]
    for key, value in (extra or {}).items():
        if key in record:
            raise DataError(f"episode {episode.seed!r}: extra key {key!r} would replace the record's own field")
        record[key] = value
    return record


def read_records(paths: str | Path | Iterable[str | Path]) -> list[dict[str, Any]]:
    """Read episode records from JSONL files (one JSON object a line; blank lines are skipped).

    Args:
        paths: one path or several; records keep the files' order.

    Returns:
        The records, in order.

    Raises:
        ValueError: naming the file and line of a line that is not a JSON object.

    Example:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "r.jsonl")
        >>> _ = open(path, "w").write('{"seed": "a"}\\n\\n{"seed": "b"}\\n')
        >>> [r["seed"] for r in read_records(path)]
        ['a', 'b']
        >>> _ = open(path, "w").write('{"seed": "a"}\\n[1]\\n')
        >>> read_records([path])
        Traceback (most recent call last):
        ...
        trl_env.errors.DataError: .../r.jsonl:2: expected a JSON object (one episode record), got list
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    records: list[dict[str, Any]] = []
    for path in paths:
        with open(path, encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as error:
                    raise DataError(f"{path}:{number}: not valid JSON ({error.msg} at column {error.colno})") from None
                if not isinstance(record, dict):
                    raise DataError(
                        f"{path}:{number}: expected a JSON object (one episode record), got {type(record).__name__}"
                    )
                records.append(record)
    return records
