"""A real tiny model that writes a fixed answer while sampling: tool calls from a random model.

A random model never calls a tool. :func:`script_model` raises by ``boost`` the logit of the next
token of ``text + end_token`` whenever gradients are off, so sampling writes the script, while
training forward passes (gradients on) see the model's own logits: the policy, its logprobs and the
gradient stay real, and the model pays its full forward cost. The script starts after a generation
prompt ending with ``anchor`` (``"\\n"`` after Qwen's ``assistant``) and follows each row by the
position of its last token (a forward with a KV cache sees only the new token), so tokens may repeat
(several JSON tool calls in one answer).

Example:
    >>> from trl_env.testing import build_tiny_qwen3_model
    >>> calls = '<tool_call>{"name":"add","arguments":{"a":1}}</tool_call>\\n<tool_call>{"name":"add"}</tool_call>'
    >>> scripted = script_model(build_tiny_qwen3_model(tokenizer), tokenizer, calls)
    >>> messages = [{"role": "user", "content": "Go."}]
    >>> ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    >>> with torch.no_grad():
    ...     out = scripted.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)[0, len(ids) :]
    >>> tokenizer.decode(out) == calls + "<|im_end|>"
    True
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers import PreTrainedTokenizerBase, Qwen3ForCausalLM


def script_model(
    model: Qwen3ForCausalLM,
    tokenizer: PreTrainedTokenizerBase,
    text: str,
    *,
    anchor: str = "\n",
    end_token: str = "<|im_end|>",
    boost: float = 100.0,
) -> Qwen3ForCausalLM:
    """Make ``model`` write ``text`` then ``end_token`` after ``anchor`` whenever it samples (no gradient).

    A row is on the script when its last token is the anchor, or is the script's next token at the
    position the previous forward pass expected it; rows that sample something else leave it. Rows
    are told apart by position only: two rows that started the script at different positions can be
    confused where the script repeats a token at one position (rows of equal prompts never are).
    """
    tokens = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids(end_token)]
    chain = [tokenizer.encode(anchor, add_special_tokens=False)[-1], *tokens]
    expected: dict[tuple[int, int], int] = {}  # (position, token) -> its index in chain, set by the last forward

    class ScriptedQwen3(Qwen3ForCausalLM):
        def forward(self, input_ids: Any = None, **kwargs: Any) -> Any:
            positions = None if input_ids is None else _last_positions(input_ids, kwargs)
            out = super().forward(input_ids=input_ids, **kwargs)
            if torch.is_grad_enabled() or input_ids is None:
                return out
            rows, targets, following = [], [], {}
            for row, key in enumerate(zip(positions, input_ids[:, -1].tolist(), strict=True)):
                index = expected.get(key, 0 if key[1] == chain[0] else None)
                if index is not None and index + 1 < len(chain):
                    rows.append(row)
                    targets.append(chain[index + 1])
                    following[(key[0] + 1, chain[index + 1])] = index + 1
            expected.clear()
            expected.update(following)
            if rows:
                out.logits[torch.tensor(rows), -1, torch.tensor(targets)] += boost
            return out

    ScriptedQwen3.forward.__signature__ = inspect.signature(Qwen3ForCausalLM.forward)  # TRL reads the signature
    model.__class__ = ScriptedQwen3
    return model


def _last_positions(input_ids: torch.Tensor, kwargs: dict[str, Any]) -> list[int]:
    """The position of each row's last input token: from ``position_ids`` (left padding), else the cache's length."""
    position_ids = kwargs.get("position_ids")
    if position_ids is not None:
        return position_ids[:, -1].tolist()
    cache_position = kwargs.get("cache_position")
    if cache_position is not None:
        return [int(cache_position[-1])] * input_ids.shape[0]
    cache = kwargs.get("past_key_values")
    past = cache.get_seq_length() if cache is not None else 0
    return [past + input_ids.shape[1] - 1] * input_ids.shape[0]
