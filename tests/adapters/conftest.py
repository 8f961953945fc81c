"""Shared pieces of the adapter tests: the repository root importable, a tiny-model rollout helper."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from trl_env import ChatTemplateProcessor, TransformersGenerator, rollout

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


@pytest.fixture(scope="session")
def tiny_rollout(qwen3_tokenizer, tiny_qwen3) -> Callable[..., list]:
    """``tiny_rollout(factory, seeds, **config)``: a real rollout with the tiny random Qwen3."""
    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = TransformersGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[stop])
    processor = ChatTemplateProcessor(qwen3_tokenizer)

    def run(factory: Callable, seeds: Sequence[str], **config: object) -> list:
        config = {"max_turns": 3, "max_turn_tokens": 8, "max_completion_tokens": 4096, "max_env_tokens": 1024, **config}
        return rollout(factory, list(seeds), generator, processor, **config)

    return run
