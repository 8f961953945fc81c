"""Fixtures of the viewer tests: real tiny-model rollouts as records, pages, and a headless Chromium."""

from __future__ import annotations

import copy
import random

import pytest

from tests.viewer.rollouts import tiny_records


@pytest.fixture(scope="session")
def records(tiny_qwen3, qwen3_tokenizer) -> list[dict]:
    """Records of a real rollout of the tiny Qwen3: steps 0-2, every stop reason, an env error."""
    return tiny_records(tiny_qwen3, qwen3_tokenizer)


def many(records: list[dict], n: int, seed: int = 0) -> list[dict]:
    """``n`` records made from real ones: new seeds, steps 0..99 and spread rewards, the tokens as they were."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        record = copy.copy(records[i % len(records)])
        record.update(seed=f"ep-{i}", step=i // (n // 100 or 1), reward=round(rng.random() * 1.3, 3))
        out.append(record)
    return out
