"""The demo's held-out evaluation: the same seeds, budgets and sampling noise before and after training.

Imports torch and trl_env: ``run_demo.py`` imports it once the environment is set.

Example:
    >>> evaluation = HeldOutEvaluation(factory, tokenizer, processor, seeds, plan, False, out)  # doctest: +SKIP
    >>> evaluation(model, "before").success_rate  # doctest: +SKIP
    0.305
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from demo.plan import DemoPlan
from trl_env.evaluation import EvalSummary, evaluate


@dataclass
class HeldOutEvaluation:
    """Evaluates a policy on the held-out seeds and writes its transcripts to ``out/transcripts_<label>.jsonl``."""

    env_factory: Callable[[], Any]
    tokenizer: Any
    processor: Any
    seeds: Sequence[Any]
    plan: DemoPlan
    bf16: bool  # sample under bfloat16 autocast
    out: Path

    def __call__(self, policy: Any, label: str, top_k: int | None = None) -> EvalSummary:
        """Play every held-out seed with ``policy``, print the summary and return it.

        ``label``: before/after (with ``_greedy`` under ``top_k`` 1); ``top_k``: sample among the most likely
        tokens only, 1 decoding greedily (None: sampled at temperature 1, the demo's measure).
        """
        torch.manual_seed(1234)  # the same sampling noise before and after
        how = "greedily" if top_k == 1 else f"top-k {top_k}" if top_k else "sampled"
        print(f"\n== evaluating the {label} model on {len(self.seeds)} held-out episodes ({how})")
        summary = evaluate(
            self.env_factory,
            policy,
            self.tokenizer,
            self.seeds,
            processor=self.processor,
            top_k=top_k,
            batch_size=self.plan.eval_batch_size,
            autocast_dtype=torch.bfloat16 if self.bf16 else None,
            config=self.plan.rollout_config(),
        )
        summary.write_jsonl(self.out / f"transcripts_{label}.jsonl")
        print(summary.format())
        return summary
