"""Fixtures of the vLLM tests: ONE in-process ``vllm.LLM`` for the whole session, on the tiny peaked
Qwen3 of ``tests/conftest.py`` (``peaked_model_dir``; ``peaked_hf_model`` holds the same weights in
transformers for reference logprobs, and ``vllm_server_url`` the session's one ``vllm serve``).

Test modules that need vLLM are marked ``skipif(not vllm_installed())`` (a metadata lookup: vLLM
is imported only when the engine fixture first runs, at the end of the suite), so they are
skipped where vLLM is not installed (``scripts/install_vllm_cpu.sh`` installs it) -- unless
``TRL_ENV_REQUIRE_VLLM=1`` (set by ``make test``), where a missing vLLM is a collection error:
the suite must not go green by skipping them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from vllm_helpers import set_vllm_env, vllm_installed  # noqa: E402

from trl_env.generation.vllm_engine import shutdown_llm  # noqa: E402

set_vllm_env()

if os.environ.get("TRL_ENV_REQUIRE_VLLM") == "1" and not vllm_installed():
    raise RuntimeError(
        "TRL_ENV_REQUIRE_VLLM=1 but no vLLM distribution is installed in "
        f"{sys.prefix}; run `bash scripts/install_vllm_cpu.sh {sys.prefix}` (or `make install-vllm`)"
    )


@pytest.fixture(scope="session")
def vllm_llm(peaked_model_dir):
    """The session's single ``vllm.LLM`` (processed logprobs, eager, float32)."""
    import vllm

    llm = vllm.LLM(
        model=str(peaked_model_dir),
        dtype="float32",
        max_model_len=2048,
        enforce_eager=True,
        seed=0,
        logprobs_mode="processed_logprobs",
    )
    yield llm
    shutdown_llm(llm)
