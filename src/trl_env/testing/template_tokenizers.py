"""Tokenizers for every chat-template family TRL ships, built offline.

Each is the real Qwen3 BPE with the family's own special tokens added and TRL's shipped
template set, so chunking and additivity can be checked for every template without
downloading the family's tokenizer. (The special tokens are the ones the templates use;
the ordinary-text BPE is Qwen's.)

Example:
    >>> from trl_env.testing import build_qwen3_tokenizer
    >>> tok = tokenizer_for_template("llama3_2", build_qwen3_tokenizer())
    >>> tok.convert_tokens_to_ids("<|eot_id|>") > 151668
    True
"""

from __future__ import annotations

import copy

from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizerFast

from trl_env.testing.qwen3_tokenizer import trl_chat_template

LLAMA3 = [
    "<|begin_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|eom_id|>",
    "<|python_tag|>",
    "<|end_of_text|>",
]
GEMMA = ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>"]
GEMMA4 = [
    "<bos>",
    "<eos>",
    "<|turn>",
    "<turn|>",
    "<|channel>",
    "<channel|>",
    "<|think|>",
    "<|tool_call>",
    "<tool_call|>",
    "<|tool_response>",
    "<tool_response|>",
    "<|tool>",
    "<tool|>",
    '<|"|>',
]
COHERE = [
    "<BOS_TOKEN>",
    "<|START_OF_TURN_TOKEN|>",
    "<|END_OF_TURN_TOKEN|>",
    "<|SYSTEM_TOKEN|>",
    "<|USER_TOKEN|>",
    "<|CHATBOT_TOKEN|>",
    "<|START_RESPONSE|>",
    "<|END_RESPONSE|>",
    "<|START_THINKING|>",
    "<|END_THINKING|>",
]
IDEFICS = ["<|begin_of_text|>", "<end_of_utterance>", "<|end_of_text|>"]
LFM2 = [
    "<|startoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "<|tool_list_start|>",
    "<|tool_list_end|>",
    "<|tool_response_start|>",
    "<|tool_response_end|>",
]
PHI3 = ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
DEEPSEEK = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>"]

# template name -> (special tokens to add, bos, eos)
FAMILIES: dict[str, tuple[list[str], str | None, str]] = {
    "qwen2_5": ([], None, "<|im_end|>"),
    "qwen3": ([], None, "<|im_end|>"),
    "qwen3_instruct_2507": ([], None, "<|im_end|>"),
    "qwen3_5_think": ([], None, "<|im_end|>"),
    "qwen3_5_nothink": ([], None, "<|im_end|>"),
    "llama3": (LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "llama3_1": (LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "llama3_2": (LLAMA3, "<|begin_of_text|>", "<|eot_id|>"),
    "gemma": (GEMMA, "<bos>", "<end_of_turn>"),
    "gemma3": (GEMMA, "<bos>", "<end_of_turn>"),
    "gemma4": (GEMMA4, "<bos>", "<turn|>"),
    "smolvlm": (IDEFICS, "<|im_start|>", "<end_of_utterance>"),
    "idefics3": (IDEFICS, "<|begin_of_text|>", "<end_of_utterance>"),
    "lfm2": (LFM2, "<|startoftext|>", "<|im_end|>"),
    "phi3_5": (PHI3, None, "<|end|>"),
    "cohere": (COHERE, "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "cohere2": (COHERE, "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "deepseek_r1_distill": (DEEPSEEK, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "deepseekv3": (DEEPSEEK, "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}


def tokenizer_for_template(name: str, qwen3_tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """A copy of ``qwen3_tokenizer`` carrying template ``name`` and its family's special tokens.

    Example:
        >>> tokenizer_for_template("gemma3", tokenizer).eos_token
        '<end_of_turn>'
    """
    specials, bos, eos = FAMILIES[name]
    tokenizer = _copy_sharing_model(qwen3_tokenizer)
    vocab = tokenizer.get_vocab()  # once: each call rebuilds a 151k-entry dict (~0.2 s)
    new = [t for t in specials if t not in vocab]
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in new], special_tokens=True)
    tokenizer.chat_template = trl_chat_template(name)
    if bos is not None:
        tokenizer.bos_token = bos
    tokenizer.eos_token = eos
    return tokenizer


def _copy_sharing_model(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """A deep copy of ``tokenizer`` whose backend shares the original's BPE model.

    A plain deep copy re-parses the 151k-entry vocab and merges (~0.8 s a copy). The families
    only add tokens, which live in the backend's own added vocabulary, never in the model, so the
    model (and the normalizer, pre-tokenizer, post-processor and decoder, which are replaced, never
    edited in place) can be shared. Falls back to a full deep copy where the twin would differ.
    """
    backend = tokenizer.backend_tokenizer
    if backend.truncation is not None or backend.padding is not None:
        return copy.deepcopy(tokenizer)
    twin = Tokenizer(backend.model)
    for part in ("normalizer", "pre_tokenizer", "post_processor", "decoder"):
        setattr(twin, part, getattr(backend, part))
    added = backend.get_added_tokens_decoder()
    twin.add_tokens([added[i] for i in sorted(added)])
    if twin.get_added_tokens_decoder() != added:  # ids not contiguous after the model's: cannot rebuild
        return copy.deepcopy(tokenizer)
    return copy.deepcopy(tokenizer, {id(backend): twin})
