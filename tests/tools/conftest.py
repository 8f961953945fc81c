"""Tokenizers of every tool-calling family the tool tests cover (the real Qwen3 BPE, each family's tokens)."""

from __future__ import annotations

import pytest

from tests.tools.families import FAMILIES


@pytest.fixture(scope="session")
def family_tokenizers(qwen3_tokenizer):
    from trl_env.testing.template_tokenizers import tokenizer_for_template

    names = {template for template, _ in FAMILIES}
    return {n: qwen3_tokenizer if n == "qwen3" else tokenizer_for_template(n, qwen3_tokenizer) for n in names}
