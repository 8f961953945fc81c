"""Session-wide fixtures: the real Qwen3 tokenizer (rebuilt offline, cached), tiny models, and one vLLM server.

The peaked tiny Qwen3 (``peaked_model_dir``, ``peaked_hf_model``) and the session's single ``vllm serve`` on it
(``vllm_server_url``) live here, not in ``tests/vllm_backends/conftest.py``, because the ``AsyncGRPOTrainer``
worker tests in ``tests/trainer`` use them too: one server per session, started by whichever test needs it first.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
sys.path.insert(0, str(Path(__file__).resolve().parent / "vllm_backends"))  # vllm_helpers, vllm_server


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


@pytest.fixture(scope="session")
def peaked_model_dir(qwen3_tokenizer, tmp_path_factory) -> Path:
    """A directory holding the peaked tiny Qwen3 and its tokenizer (vLLM loads from disk)."""
    from vllm_helpers import save_peaked_qwen3

    return save_peaked_qwen3(qwen3_tokenizer, tmp_path_factory.mktemp("peaked-qwen3"))


@pytest.fixture(scope="session")
def peaked_hf_model(peaked_model_dir):
    """The same weights in transformers (float32, eval mode), for recomputing logprobs."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(peaked_model_dir), dtype="float32").eval()


@pytest.fixture(scope="session")
def vllm_server_url(peaked_model_dir, tmp_path_factory):
    """``http://127.0.0.1:PORT`` of the session's vLLM server on the peaked model; killed at the end of the session."""
    from vllm_server import ServerDidNotStart, serve

    log = tmp_path_factory.mktemp("vllm-serve") / "server.log"
    try:
        with serve(peaked_model_dir, log) as url:
            yield url
    except ServerDidNotStart as error:
        pytest.fail(str(error))
