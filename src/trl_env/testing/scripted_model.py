"""A real tiny model that writes a fixed answer while sampling: tool calls from a random model.

A random model never calls a tool. :func:`script_model` raises the logit of the next token of
``text + end_token`` by ``boost`` (keyed on the last input token) whenever gradients are off, so
sampling writes the script, while training forward passes (gradients on) see the model's own
logits: the policy, its logprobs and the gradient stay real, and the model pays its full forward
cost. The generation prompt must end with ``anchor`` (``"\\n"`` after Qwen's ``assistant``).

Example:
    >>> from trl_env.testing import build_tiny_qwen3_model
    >>> call = '<tool_call>{"name":"step","arguments":{}}</tool_call>'
    >>> scripted = script_model(build_tiny_qwen3_model(tokenizer), tokenizer, call)
    >>> messages = [{"role": "user", "content": "Go."}]
    >>> ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=False)
    >>> with torch.no_grad():
    ...     out = scripted.generate(torch.tensor([ids]), max_new_tokens=16, do_sample=False)[0, len(ids) :]
    >>> tokenizer.decode(out)
    '<tool_call>{"name":"step","arguments":{}}</tool_call><|im_end|>'
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

    Raises:
        ValueError: a token repeats in ``anchor + text + end_token`` (the script is keyed on the last token).
    """
    tokens = tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids(end_token)]
    chain = [tokenizer.encode(anchor, add_special_tokens=False)[-1], *tokens]
    if len(set(chain)) != len(chain):
        raise ValueError("the scripted answer must not repeat a token: the script is keyed on the last token")
    script = dict(zip(chain, chain[1:], strict=False))

    class ScriptedQwen3(Qwen3ForCausalLM):
        def forward(self, input_ids: Any = None, **kwargs: Any) -> Any:
            out = super().forward(input_ids=input_ids, **kwargs)
            if torch.is_grad_enabled() or input_ids is None:
                return out
            last = input_ids[:, -1].tolist()
            rows = [row for row, token in enumerate(last) if token in script]
            if rows:
                targets = torch.tensor([script[last[row]] for row in rows])
                out.logits[torch.tensor(rows), -1, targets] += boost
            return out

    ScriptedQwen3.forward.__signature__ = inspect.signature(Qwen3ForCausalLM.forward)  # TRL reads the signature
    model.__class__ = ScriptedQwen3
    return model
