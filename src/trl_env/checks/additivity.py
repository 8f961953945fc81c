"""Check *essential additivity*: tokenizing chunk by chunk equals tokenizing the whole text.

trl-env never re-tokenizes history: the prompt and every environment chunk are tokenized on
their own and the model's sampled ids are kept verbatim. That is only faithful when
``tok(a + b) == tok(a) + tok(b)`` at every chunk boundary, which holds when boundaries sit
at special tokens, and fails e.g. when a generation prompt ends in plain text
(``"Assistant:"``) and the model's answer starts with ``"\\n"``. This module checks it on
many conversations instead of assuming it.

Example:
    >>> report = check_additivity(tokenizer, processor)
    >>> report.ok
    True
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.chat.chunked_processor import ChunkedProcessor
from trl_env.chat.template_processor import ChatTemplateProcessor
from trl_env.checks.pieces import AdditivityFailure, AdditivityReport, Piece, can_follow, compare_pieces
from trl_env.checks.template import template_differences
from trl_env.checks.tool_turns import check_tool_turns
from trl_env.core import Processor

__all__ = ["AdditivityFailure", "AdditivityReport", "Piece", "check_additivity", "compare_pieces"]

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase

DEFAULT_DELTAS = [
    "Guess a number between 1 and 100.",
    "Higher than 50.",
    "  leading spaces and trailing newline\n",
    "\nstarts with a newline",
    "ends with newlines\n\n",
    "tabs\tand\r\nwindows newlines",
    "unicode: café, naïve, 日本語, emoji 🎉, Ελληνικά",
    unicodedata.normalize("NFD", "decomposed: café naïve"),
    '{"json": [1, 2, 3], "nested": {"a": null}}',
    "```python\nprint('code')\n```",
    "",
    " ",
    "Lorem ipsum dolor sit amet. " * 60,
]
DEFAULT_OUTPUTS = [
    "42",
    " 42",
    "\n42",
    "42\n",
    "Done.",
    "Done.\n\n",
    "<think>\nLet me think.\n</think>\n\n42",
    "<think>\n\n</think>\n\n42",
    'I will call a tool.\n<tool_call>\n{"name": "guess", "arguments": {"n": 7}}\n</tool_call>',
    "unicode: café 日本語 🎉",
    "",
    "word " * 300,
]


def _conversations(encoder: ChunkEncoder, system_prompts, deltas, outputs):
    tokenizer = encoder.tokenizer
    end = encoder.turn_end

    def model(text: str, stop: bool) -> Piece:
        body = text + (end if stop else "")
        return Piece("model" + ("+stop" if stop else ""), body, tokenizer.encode(body, add_special_tokens=False))

    for system_prompt in system_prompts:
        for i, delta in enumerate(deltas):
            output = outputs[i % len(outputs)]
            next_delta = deltas[(i + 1) % len(deltas)]
            for stop in (True, False):
                prompt_ids, prompt_text = encoder.prompt(system_prompt, delta)
                env_ids, env_text = encoder.user_turn(next_delta, close_turn=not stop)
                pieces = [
                    Piece("prompt", prompt_text, prompt_ids),
                    model(output, stop),
                    Piece("env", env_text, env_ids),
                    model(outputs[(i + 3) % len(outputs)], True),
                ]
                label = f"sys={bool(system_prompt)} delta#{i} out#{i % len(outputs)} stop={stop}"
                yield label, pieces
    for j, output in enumerate(outputs):  # every output after the first prompt, both endings
        prompt_ids, prompt_text = encoder.prompt("", deltas[0])
        for stop in (True, False):
            env_ids, env_text = encoder.user_turn(deltas[1 % len(deltas)], close_turn=not stop)
            yield (
                f"out#{j} stop={stop}",
                [Piece("prompt", prompt_text, prompt_ids), model(output, stop), Piece("env", env_text, env_ids)],
            )


def check_additivity(
    tokenizer: PreTrainedTokenizerBase,
    processor: Processor,
    *,
    system_prompts: Sequence[str] | None = None,
    deltas: Sequence[str] | None = None,
    outputs: Sequence[str] | None = None,
    compare_template: bool = True,
    tool_turns: bool = True,
) -> AdditivityReport:
    """Tokenize many conversations chunk by chunk and whole; report every mismatch.

    The conversations cover system/user/env chunks, model outputs ending with and without
    the stop token, thinking and tool-call blocks, leading/trailing whitespace and
    newlines, unicode (NFC and NFD) and long texts. Pass your own texts to check more.
    Outputs that start with whitespace are only checked after a generation prompt that
    does not itself end in whitespace (see ``can_follow``). A processor not cut from this
    tokenizer's own template is also compared with the template
    (:func:`~trl_env.checks.template.template_differences`) unless ``compare_template=False``.
    Templates that render tool calls also get the tool-turn cases of
    :func:`~trl_env.checks.tool_turns.check_tool_turns` (additivity and template equality) unless
    ``tool_turns=False``.

    Example:
        >>> check_additivity(tokenizer, ChatTemplateProcessor(tokenizer)).ok
        True
    """
    encoder = ChunkEncoder(tokenizer, processor)
    outputs = [o for o in (outputs or DEFAULT_OUTPUTS) if can_follow(encoder.generation_prompt_tail, o)]
    if system_prompts is None:
        system_prompts = [""] + (["You are a helpful agent.\nAnswer briefly."] if _has_system_role(processor) else [])
    name = processor.name if isinstance(processor, ChunkedProcessor) else type(processor).__name__
    report = AdditivityReport(processor=name)
    if compare_template and tokenizer.chat_template and not _derived_from(processor, tokenizer):
        report.template_differences = template_differences(tokenizer, processor)
    for case, pieces in _conversations(
        encoder, list(system_prompts), list(deltas or DEFAULT_DELTAS), outputs or ["42"]
    ):
        report.cases += 1
        failure = compare_pieces(tokenizer, case, pieces)
        if failure is not None:
            report.failures.append(failure)
    if tool_turns:
        check_tool_turns(encoder, report, list(system_prompts))
    return report


def _has_system_role(processor: Processor) -> bool:
    try:
        processor.init_system_input("x")
    except ValueError:  # a format without a system role refuses any system prompt
        return False
    return True


def _derived_from(processor: Processor, tokenizer: PreTrainedTokenizerBase) -> bool:
    """True when ``processor`` was cut from this very template (then it renders as the template by construction)."""
    return isinstance(processor, ChatTemplateProcessor) and processor.tokenizer.chat_template == tokenizer.chat_template
