"""Fixtures shared by the tests and the docstring examples (``--doctest-modules`` over ``src/trl_env``).

Docstring examples run for real: they see ``tokenizer`` (the real Qwen3 tokenizer, rebuilt offline),
``model`` (a tiny random Qwen3), ``processor``, ``generator`` (a ``TransformersGenerator`` on the tiny
model), ``GuessNumberEnv``, ``tiny_model_dir`` (both saved to a folder) and ``tmp_path``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent
CACHE = Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache"))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@pytest.fixture(scope="session")
def qwen3_tokenizer():
    """The real Qwen3 tokenizer, built once per machine into .cache/."""
    import torch

    from trl_env.testing import build_qwen3_tokenizer

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    return build_qwen3_tokenizer(CACHE / "qwen3-tokenizer")


@pytest.fixture(scope="session")
def tiny_qwen3(qwen3_tokenizer):
    """A tiny random Qwen3-architecture model sized for the Qwen3 tokenizer."""
    from trl_env.testing import build_tiny_qwen3_model

    return build_tiny_qwen3_model(qwen3_tokenizer)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tiny_qwen3, qwen3_tokenizer) -> Path:
    """The tiny Qwen3 and the Qwen3 tokenizer saved to a folder (for code that loads from disk)."""
    path = tmp_path_factory.mktemp("tiny-qwen3")
    tiny_qwen3.save_pretrained(str(path))
    qwen3_tokenizer.save_pretrained(str(path))
    return path


@pytest.fixture(autouse=True)
def _doctest_names(request):
    """Give docstring examples the objects they talk about (other tests are left alone)."""
    if not isinstance(request.node, pytest.DoctestItem):
        return
    from examples.guess_number import GuessNumberEnv
    from trl_env.chat.chunk_encoder import ChunkEncoder
    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.cli import main as cli_main
    from trl_env.generation.transformers_generator import TransformersGenerator

    tokenizer = request.getfixturevalue("qwen3_tokenizer")
    model = request.getfixturevalue("tiny_qwen3")
    names = request.getfixturevalue("doctest_namespace")
    names.update(
        tokenizer=tokenizer,
        model=model,
        processor=ChatTemplateProcessor(tokenizer),
        generator=TransformersGenerator(
            model, tokenizer, stop_token_ids=[tokenizer.convert_tokens_to_ids("<|im_end|>")]
        ),
        GuessNumberEnv=GuessNumberEnv,
        GuessEnv=GuessNumberEnv,
        MyEnv=GuessNumberEnv,
        seeds=["3", "9"],
        tok=tokenizer,
        tiny_qwen3=model,
        encoder=ChunkEncoder(tokenizer, ChatTemplateProcessor(tokenizer)),
        main=cli_main,
        tiny_model_dir=request.getfixturevalue("tiny_model_dir"),
        tmp_path=request.getfixturevalue("tmp_path"),
    )
