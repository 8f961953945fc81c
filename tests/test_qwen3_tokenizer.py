"""The offline Qwen3 tokenizer fixture is the real one: known ids and tokenizations."""

import pytest


@pytest.mark.parametrize(
    ("token", "token_id"),
    [
        ("<|endoftext|>", 151643),
        ("<|im_start|>", 151644),
        ("<|im_end|>", 151645),
        ("<tool_call>", 151657),
        ("<think>", 151667),
        ("</think>", 151668),
    ],
)
def test_added_token_ids(qwen3_tokenizer, token, token_id):
    assert qwen3_tokenizer.convert_tokens_to_ids(token) == token_id


@pytest.mark.parametrize(
    ("text", "ids"),
    [
        ("Hello world!", [9707, 1879, 0]),
        ("12345", [16, 17, 18, 19, 20]),  # Qwen splits digits one by one
        ("\n\n", [271]),
        ("<|im_start|>user\nhi<|im_end|>", [151644, 872, 198, 6023, 151645]),
    ],
)
def test_known_tokenizations(qwen3_tokenizer, text, ids):
    assert qwen3_tokenizer.encode(text, add_special_tokens=False) == ids


def test_vocab_size_and_special_roles(qwen3_tokenizer):
    assert len(qwen3_tokenizer) == 151669
    assert qwen3_tokenizer.eos_token == "<|im_end|>"
    assert qwen3_tokenizer.pad_token == "<|endoftext|>"


def test_chat_template_renders_qwen3(qwen3_tokenizer):
    text = qwen3_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
