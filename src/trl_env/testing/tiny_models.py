"""Tiny randomly initialised models of real architectures, built locally."""

from __future__ import annotations

import torch
from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM


def build_tiny_qwen3_model(
    tokenizer: PreTrainedTokenizerBase, *, hidden_size: int = 64, seed: int = 0
) -> Qwen3ForCausalLM:
    """A two-layer Qwen3 model with random weights sized for ``tokenizer`` (head_dim 32).

    Example:
        >>> from trl_env.testing import build_qwen3_tokenizer
        >>> model = build_tiny_qwen3_model(build_qwen3_tokenizer())
        >>> model.config.num_hidden_layers
        2
    """
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=2,
        num_attention_heads=hidden_size // 32,
        num_key_value_heads=hidden_size // 32,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model.eval()
