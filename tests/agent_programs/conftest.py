"""Scripted tiny Qwen3 generators for the agent tests: the model writes a fixed tool call at every turn."""

from __future__ import annotations

import pytest

MULTIPLY = '<tool_call>{"name":"multiply","arguments":{"a":6,"b":7}}</tool_call>'
ANSWER = '<tool_call>{"name":"answer","arguments":{"value":43}}</tool_call>'
FINAL_ANSWER = '<tool_call>{"name":"final_answer","arguments":{"answer":"42"}}</tool_call>'


@pytest.fixture(scope="session")
def scripted_generator(qwen3_tokenizer):
    """script text -> (model, generator) writing it at every turn (built once per text)."""
    from trl_env.generation.transformers_generator import TransformersGenerator
    from trl_env.testing import build_tiny_qwen3_model
    from trl_env.testing.scripted_model import script_model

    cache: dict = {}

    def get(text: str):
        if text not in cache:
            model = script_model(build_tiny_qwen3_model(qwen3_tokenizer), qwen3_tokenizer, text)
            stop = [qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")]
            cache[text] = model, TransformersGenerator(model, qwen3_tokenizer, stop_token_ids=stop)
        return cache[text]

    return get
