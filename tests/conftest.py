"""Session-wide fixtures: the real Qwen3 tokenizer (rebuilt offline, cached) and tiny models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def template_tokenizers(qwen3_tokenizer):
    """name -> tokenizer carrying that TRL template and its family's special tokens (built lazily, cached)."""
    from trl_env.testing.template_tokenizers import tokenizer_for_template

    cache: dict = {}

    def get(name: str):
        if name not in cache:
            cache[name] = tokenizer_for_template(name, qwen3_tokenizer)
        return cache[name]

    return get
