"""Session-wide fixtures: the real Qwen3 tokenizer (rebuilt offline, cached) and tiny models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from trl_env.testing import build_qwen3_tokenizer, build_tiny_qwen3_model

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """The real Qwen3 tokenizer, built once per machine into .cache/."""
    return build_qwen3_tokenizer(CACHE / "qwen3-tokenizer")


@pytest.fixture(scope="session")
def tiny_qwen3(qwen3_tokenizer):
    """A tiny random Qwen3-architecture model sized for the Qwen3 tokenizer."""
    return build_tiny_qwen3_model(qwen3_tokenizer)


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


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory, tiny_qwen3, qwen3_tokenizer) -> Path:
    """The tiny Qwen3 and the Qwen3 tokenizer saved to a folder (for code that loads from disk)."""
    path = tmp_path_factory.mktemp("tiny-qwen3")
    tiny_qwen3.save_pretrained(str(path))
    qwen3_tokenizer.save_pretrained(str(path))
    return path
