"""Evaluate a model on an environment: batched rollouts, per-episode records, aggregate rates.

Success and any other per-episode figure come from the environment itself: an env with a
``metrics()`` method (:class:`~trl_env.core.ReportsMetrics`) reports them when its episode ends
(``{"success": 1.0, "guesses": 3}``). The summary's success rate is the mean of ``success`` over
episodes that report it (nan when none does); every metric is summed and averaged over the
episodes reporting it, so a ratio pooled over episodes (e.g. valid answers per answer) is
``metric_sums["valid"] / metric_sums["answers"]``. The parse-failure rate is pooled over model turns.

Every number in an :class:`EvalSummary` is computed from its ``records`` (one JSON-ready dict
per episode), so the aggregates always match the JSONL file written from them.

Example:
    >>> summary = evaluate(GuessNumberEnv, model, tokenizer, ["eval-0", "eval-1"], progress=False,
    ...                    max_turns=2, max_turn_tokens=4)
    >>> summary.episodes, 0.0 <= summary.success_rate <= 1.0, sorted(summary.metric_means)[:2]
    (2, True, ['answers', 'consistent_guesses'])
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm

from trl_env.chat.template_processor import ChatTemplateProcessor
from trl_env.core import Env, Processor
from trl_env.engine.config import RolloutConfig
from trl_env.engine.rollout import RolloutEngine
from trl_env.generation.kv_cache import EpisodeCacheGenerator
from trl_env.generation.local_model import autocast_context, stop_token_ids
from trl_env.viewer.records import episode_record


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
    truncated_rate: float
    env_errors: int
    metric_sums: dict[str, float] = field(default_factory=dict)
    metric_means: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    first_error: str | None = None
    records: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]], seconds: float = 0.0) -> EvalSummary:
        """Aggregate per-episode records (as written to the JSONL file).

        Example:
            >>> r = {"reward": 1.3, "num_turns": 2, "parse_failures": 0, "stop_reason": "done", "error": None,
            ...      "metrics": {"success": 1.0, "answers": 2, "valid": 1}}
            >>> s = EvalSummary.from_records([r, {**r, "metrics": None}])
            >>> s.success_rate, s.metric_sums["valid"] / s.metric_sums["answers"]
            (1.0, 0.5)
        """
        n = len(records)
        model_turns = sum(r["num_turns"] for r in records)
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        for record in records:
            for name, value in (record.get("metrics") or {}).items():
                sums[name] = sums.get(name, 0.0) + float(value)
                counts[name] = counts.get(name, 0) + 1
        errors = [r["error"] for r in records if r["error"] is not None]
        return cls(
            episodes=n,
            success_rate=_ratio(sums.get("success", 0.0), counts.get("success", 0)),
            mean_reward=_ratio(sum(r["reward"] for r in records), n),
            mean_turns=_ratio(model_turns, n),
            parse_failure_rate=_ratio(sum(r["parse_failures"] for r in records), model_turns),
            truncated_rate=_ratio(sum(r["stop_reason"] == "token_budget" for r in records), n),
            env_errors=len(errors),
            metric_sums=sums,
            metric_means={name: sums[name] / counts[name] for name in sums},
            seconds=seconds,
            first_error=errors[0] if errors else None,
            records=list(records),
        )

    def metrics(self) -> dict[str, Any]:
        """The aggregate numbers as a dict (no records).

        Example:
            >>> EvalSummary.from_records([]).metrics()["episodes"]
            0
        """
        return {k: v for k, v in asdict(self).items() if k != "records"}

    def format(self) -> str:
        """A small human-readable table (``n/a`` where nothing was measured).

        Example:
            >>> print(EvalSummary.from_records([]).format().splitlines()[1])
            success rate         n/a (the env reports no success metric)
        """

        def show(value: float, digits: int = 3, why: str = "") -> str:
            return f"{value:.{digits}f}" if not math.isnan(value) else "n/a" + (f" ({why})" if why else "")

        rows = [
            ("episodes", f"{self.episodes}"),
            ("success rate", show(self.success_rate, why="the env reports no success metric")),
            ("mean reward", show(self.mean_reward)),
            ("mean turns", show(self.mean_turns, 2)),
            ("parse-failure rate", show(self.parse_failure_rate, why="no model turns")),
            ("truncated rate", show(self.truncated_rate)),
            ("env errors", f"{self.env_errors}"),
            *((f"mean {name}", show(value)) for name, value in sorted(self.metric_means.items()) if name != "success"),
            ("seconds", f"{self.seconds:.1f}"),
        ]
        if self.first_error:
            rows.append(("first env error", self.first_error))
        return "\n".join(f"{name:<20} {value}" for name, value in rows)

    def write_jsonl(self, path: str | Path) -> Path:
        """Write one JSON line per episode record; returns the path.

        Example:
            >>> import tempfile, os
            >>> EvalSummary.from_records([]).write_jsonl(os.path.join(tempfile.mkdtemp(), "e.jsonl")).name
            'e.jsonl'
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", encoding="utf-8") as out:
            for record in self.records:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
        return path


def evaluate(
    env_factory: Callable[[], Env],
    model: Any,
    tokenizer: Any,
    seeds: Sequence[str],
    *,
    processor: Processor | None = None,
    config: RolloutConfig | None = None,
    temperature: float = 1.0,
    top_k: int | None = None,
    batch_size: int = 64,
    progress: bool = True,
    autocast_dtype: torch.dtype | None = None,
    **settings: Any,
) -> EvalSummary:
    """Play one sampled episode per seed with ``model`` and summarize them.

    Args:
        env_factory: makes a fresh env per episode.
        model: a transformers causal LM.
        tokenizer: its tokenizer.
        seeds: one episode per seed.
        processor: the chat format; defaults to the tokenizer's :class:`ChatTemplateProcessor`.
        config: budgets and policies; ``settings`` (:class:`RolloutConfig` field names) override it.
        temperature: sampling temperature.
        top_k: sample among the ``top_k`` most likely tokens only; 1 is greedy decoding (None: all tokens).
        batch_size: episodes played together.
        progress: a tqdm bar counting episodes.
        autocast_dtype: sample under ``torch.autocast`` with this dtype (e.g. ``torch.bfloat16``).

    Returns:
        The summary, with one record per episode.
    """
    rollout_config = RolloutConfig.from_kwargs(config, **settings)
    if processor is None:
        processor = ChatTemplateProcessor(tokenizer, per_turn=rollout_config.per_turn)
    generator = EpisodeCacheGenerator(
        model,
        tokenizer,
        temperature=temperature,
        top_k=top_k,
        stop_token_ids=stop_token_ids(model, tokenizer, processor),
        model_context=autocast_context(model, autocast_dtype),
    )
    engine = RolloutEngine(generator, processor, tokenizer, rollout_config)
    start = time.perf_counter()
    records: list[dict[str, Any]] = []
    bar = tqdm(total=len(seeds), desc="eval episodes", unit="ep", disable=not progress)
    try:
        for first in range(0, len(seeds), max(1, batch_size)):
            batch = list(seeds[first : first + max(1, batch_size)])
            for index, episode in enumerate(engine.run(env_factory, batch)):
                # the transcript plus the tokens, mask and logprobs, so that `trl-env view` shows them
                record = {**episode.transcript(), **episode_record(episode, tokenizer), "index": first + index}
                records.append(record)
            bar.update(len(batch))
    finally:
        bar.close()
        engine.close()
    return EvalSummary.from_records(records, seconds=time.perf_counter() - start)
