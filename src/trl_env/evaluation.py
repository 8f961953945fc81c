"""Evaluate a model on an environment: batched rollouts, per-episode records, aggregate rates.

An episode counts as a **success** when its final environment has an attribute ``solved``
that is True; for an environment without ``solved``, when its reward is at least 1.0.

Environments that count their answers the way ``examples.guess_number`` does (integer
attributes ``turns``, ``valid_guesses`` and ``consistent_guesses``) also get a
**valid-answer rate** and a **feedback-consistency rate**, pooled over all answers:
``sum(valid_guesses) / sum(turns)`` and ``sum(consistent_guesses) / sum(turns)`` (the env's
``turns`` is stored as ``answers`` in a record, whose ``turns`` is the list of model turns).
The **parse-failure rate** is pooled over model turns too.

Every number in an :class:`EvalSummary` is computed from its ``records`` (one JSON-ready
dict per episode), so the aggregates always match the JSONL file written from them.

Example:
    >>> summary = evaluate(GuessNumberEnv, model, tokenizer, heldout_seeds(128), max_turns=5)  # doctest: +SKIP
    >>> print(summary.format())  # doctest: +SKIP
    episodes             128
    success rate         0.094
    ...
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from trl_env.caching_generators import EpisodeCacheGenerator
from trl_env.chat_template_processor import ChatTemplateProcessor
from trl_env.core import Env, Processor
from trl_env.engine import rollout

COUNTERS = ("turns", "valid_guesses", "consistent_guesses")


class _Tracked:
    """Wraps an env and keeps the object its last ``reset``/``step`` returned, to read its final state."""

    def __init__(self, env: Env) -> None:
        self.env = env

    @property
    def reward(self) -> float:
        return self.env.reward

    @property
    def alive(self) -> bool:
        return self.env.alive

    def reset(self, seed: str) -> tuple[_Tracked, str]:
        self.env, delta = self.env.reset(seed)
        return self, delta

    def step(self, action: str) -> tuple[_Tracked, str]:
        self.env, delta = self.env.step(action)
        return self, delta


def _track(env_factory: Callable[[], Env], tracked: list[_Tracked]) -> _Tracked:
    tracked.append(_Tracked(env_factory()))
    return tracked[-1]


def env_outcome(env: Any, reward: float) -> dict[str, Any]:
    """Success flag and answer counters read from a finished environment.

    The env's ``turns`` counter is recorded as ``answers`` (a record's ``turns`` is the transcript).

    Example:
        >>> class Done:
        ...     solved, turns, valid_guesses, consistent_guesses = True, 3, 3, 2
        >>> env_outcome(Done(), 1.2)
        {'success': True, 'answers': 3, 'valid_guesses': 3, 'consistent_guesses': 2}
        >>> env_outcome(object(), 0.5)
        {'success': False}
    """
    solved = getattr(env, "solved", None)
    outcome: dict[str, Any] = {"success": bool(solved) if solved is not None else reward >= 1.0}
    if all(isinstance(getattr(env, name, None), int) for name in COUNTERS):
        outcome["answers"] = int(env.turns)
        outcome.update({name: int(getattr(env, name)) for name in COUNTERS[1:]})
    return outcome


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else math.nan


@dataclass
class EvalSummary:
    """Aggregate results of an evaluation and the per-episode records they come from."""

    episodes: int
    success_rate: float
    mean_reward: float
    mean_turns: float
    parse_failure_rate: float
    valid_answer_rate: float
    consistency_rate: float
    truncated_rate: float
    env_errors: int
    seconds: float = 0.0
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]], seconds: float = 0.0) -> EvalSummary:
        """Aggregate per-episode records (as written to the JSONL file).

        Example:
            >>> r = {"success": True, "reward": 1.3, "num_turns": 2, "parse_failures": 0, "stop_reason": "done",
            ...      "error": None, "answers": 2, "valid_guesses": 2, "consistent_guesses": 1}
            >>> EvalSummary.from_records([r]).consistency_rate
            0.5
        """
        n = len(records)
        model_turns = sum(r["num_turns"] for r in records)
        counted = [r for r in records if "answers" in r]
        answers = sum(r["answers"] for r in counted)
        return cls(
            episodes=n,
            success_rate=_ratio(sum(bool(r["success"]) for r in records), n),
            mean_reward=_ratio(sum(r["reward"] for r in records), n),
            mean_turns=_ratio(model_turns, n),
            parse_failure_rate=_ratio(sum(r["parse_failures"] for r in records), model_turns),
            valid_answer_rate=_ratio(sum(r["valid_guesses"] for r in counted), answers),
            consistency_rate=_ratio(sum(r["consistent_guesses"] for r in counted), answers),
            truncated_rate=_ratio(sum(r["stop_reason"] == "token_budget" for r in records), n),
            env_errors=sum(r["error"] is not None for r in records),
            seconds=seconds,
            records=list(records),
        )

    def metrics(self) -> dict[str, float]:
        """The aggregate numbers as a dict (no records).

        Example:
            >>> EvalSummary.from_records([]).metrics()["episodes"]
            0
        """
        return {k: v for k, v in asdict(self).items() if k != "records"}

    def format(self) -> str:
        """A small human-readable table.

        Example:
            >>> print(EvalSummary.from_records([]).format().splitlines()[0])
            episodes             0
        """
        rows = [
            ("episodes", f"{self.episodes}"),
            ("success rate", f"{self.success_rate:.3f}"),
            ("mean reward", f"{self.mean_reward:.3f}"),
            ("mean turns", f"{self.mean_turns:.2f}"),
            ("parse-failure rate", f"{self.parse_failure_rate:.3f}"),
            ("valid-answer rate", f"{self.valid_answer_rate:.3f}"),
            ("consistency rate", f"{self.consistency_rate:.3f}"),
            ("truncated rate", f"{self.truncated_rate:.3f}"),
            ("env errors", f"{self.env_errors}"),
            ("seconds", f"{self.seconds:.1f}"),
        ]
        return "\n".join(f"{name:<20} {value}" for name, value in rows)

    def write_jsonl(self, path: str | Path) -> Path:
        """Write one JSON line per episode record; returns the path.

        Example:
            >>> EvalSummary.from_records([]).write_jsonl("/tmp/empty.jsonl").name  # doctest: +SKIP
            'empty.jsonl'
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            for record in self.records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return path


def autocast_context(model: Any, dtype: torch.dtype | None) -> Callable[[], Any] | None:
    """A ``model_context`` for :class:`TransformersGenerator` that samples under ``torch.autocast(dtype)``.

    ``None`` when ``dtype`` is None (plain precision).

    Example:
        >>> autocast_context(None, None) is None
        True
    """
    if dtype is None:
        return None

    @contextlib.contextmanager
    def context() -> Iterator[Any]:
        device_type = next(model.parameters()).device.type
        with torch.autocast(device_type, dtype=dtype):
            yield model

    return context


def cpu_has_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX), where bf16 autocast is ~2x faster.

    Example:
        >>> isinstance(cpu_has_bf16(), bool)
        True
    """
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def stop_token_ids(model: Any, tokenizer: Any, processor: Processor) -> list[int]:
    """The model's EOS ids plus the processor's end-of-turn token.

    Example:
        >>> stop_token_ids(model, tokenizer, ChatTemplateProcessor(tokenizer))  # doctest: +SKIP
        [2]
    """
    eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [] if eos is None else ([eos] if isinstance(eos, int) else list(eos))
    chunks = getattr(processor, "chunks", None)
    turn_end = tokenizer.convert_tokens_to_ids(chunks.turn_end) if chunks is not None else tokenizer.eos_token_id
    for token in (turn_end, tokenizer.eos_token_id):
        if token is not None and token not in ids:
            ids.append(token)
    return ids


def evaluate(
    env_factory: Callable[[], Env],
    model: Any,
    tokenizer: Any,
    seeds: Sequence[str],
    *,
    processor: Processor | None = None,
    temperature: float = 1.0,
    batch_size: int = 64,
    progress: bool = True,
    autocast_dtype: torch.dtype | None = None,
    **budgets: Any,
) -> EvalSummary:
    """Play one sampled episode per seed with ``model`` and summarize them.

    ``budgets`` are :class:`~trl_env.engine.RolloutConfig` fields (``max_turns``,
    ``max_turn_tokens``, ``max_completion_tokens``, ``system_prompt``, ...). ``processor``
    defaults to the tokenizer's :class:`ChatTemplateProcessor`. Episodes run ``batch_size``
    at a time under a tqdm bar counting episodes, sampled by :class:`EpisodeCacheGenerator`
    (under ``torch.autocast(autocast_dtype)`` when given, e.g. ``torch.bfloat16``).

    Example:
        >>> summary = evaluate(GuessNumberEnv, model, tokenizer, ["eval-0", "eval-1"], max_turns=5)  # doctest: +SKIP
        >>> summary.episodes  # doctest: +SKIP
        2
    """
    processor = processor if processor is not None else ChatTemplateProcessor(tokenizer)
    generator = EpisodeCacheGenerator(
        model, tokenizer, temperature=temperature, stop_token_ids=stop_token_ids(model, tokenizer, processor),
        model_context=autocast_context(model, autocast_dtype),
    )
    start = time.perf_counter()
    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(seeds), desc="eval episodes", unit="ep", disable=not progress)
    for first in range(0, len(seeds), max(1, batch_size)):
        batch = list(seeds[first : first + max(1, batch_size)])
        tracked: list[_Tracked] = []
        factory = functools.partial(_track, env_factory, tracked)
        episodes = rollout(factory, batch, generator, processor, tokenizer=tokenizer, **budgets)
        for index, (episode, env) in enumerate(zip(episodes, tracked, strict=True)):
            record = {"index": first + index, **episode.transcript()}
            record.update(env_outcome(env.env, episode.reward))
            records.append(record)
        bar.update(len(batch))
    bar.close()
    return EvalSummary.from_records(records, seconds=time.perf_counter() - start)


def load_factory(spec: str, kwargs: dict[str, Any] | None = None) -> Callable[[], Env]:
    """Import ``"module:Factory"`` (the current directory is importable) and bind ``kwargs``.

    Example:
        >>> env = load_factory("examples.guess_number:GuessNumberEnv", {"high": 8})()  # doctest: +SKIP
        >>> env.high  # doctest: +SKIP
        8
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected MODULE:FACTORY, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    factory = importlib.import_module(module_name)
    for part in attribute.split("."):
        factory = getattr(factory, part)
    if not callable(factory):
        raise TypeError(f"{spec} is not callable")
    return functools.partial(factory, **kwargs) if kwargs else factory


def read_seeds(seeds: str | None = None, seeds_file: str | Path | None = None, episodes: int | None = None,
               default_prefix: str = "eval-") -> list[str]:
    """Seed list from a comma-separated string or a file (one per line), cycled or cut to ``episodes``.

    Without either, the seeds are ``eval-0 .. eval-{episodes-1}``.

    Example:
        >>> read_seeds("a,b", episodes=3)
        ['a', 'b', 'a']
        >>> read_seeds(episodes=2)
        ['eval-0', 'eval-1']
    """
    if seeds is not None and seeds_file is not None:
        raise ValueError("give seeds or a seeds file, not both")
    if seeds is not None:
        listed = [s.strip() for s in seeds.split(",") if s.strip()]
    elif seeds_file is not None:
        listed = [line.strip() for line in Path(seeds_file).read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        return [f"{default_prefix}{i}" for i in range(episodes if episodes is not None else 64)]
    if not listed:
        raise ValueError("the seed list is empty")
    if episodes is None:
        return listed
    return [listed[i % len(listed)] for i in range(episodes)]
