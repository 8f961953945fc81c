"""Compare a processor's rendering with the tokenizer's own chat template.

Additivity (:mod:`trl_env.checks.additivity`) says per-chunk tokenization equals whole-text
tokenization; it cannot say the text is the one the model was trained on. A hand-written processor
that forgets Qwen3's ``"\\n"`` after ``<|im_end|>`` is perfectly additive and still renders something
the template never would. This module renders the same conversations both ways and reports where
they differ, at the places a processor controls:

* the prompt: the system block (or none), the first user turn and the generation prompt;
* a turn boundary: the end-of-turn token, what follows it, and the next user turn with its
  generation prompt (the template's text right after an assistant message).

The assistant message itself is left out on purpose: presets exist for templates that render past
assistant messages differently from the generation prompt (Qwen3 drops empty thinking blocks from
history), and trl-env always trains on what the model saw when it sampled.

Example:
    >>> from trl_env.chat.presets import preset
    >>> from trl_env.testing import build_qwen3_tokenizer
    >>> tokenizer = build_qwen3_tokenizer()
    >>> template_differences(tokenizer, preset("qwen3_thinking"))
    []
    >>> import dataclasses
    >>> from trl_env.chat.chunked_processor import ChunkedProcessor
    >>> broken = ChunkedProcessor(dataclasses.replace(preset("qwen3_thinking").chunks, after_turn_end=""),
    ...                           template_kwargs={"enable_thinking": True})
    >>> [d.where for d in template_differences(tokenizer, broken)]
    ['turn boundary', 'turn boundary (with a system prompt)']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trl_env.chat.chunked_processor import ChunkedProcessor
from trl_env.chat.turn_end import require_turn_delimited
from trl_env.core import Processor

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase

SYSTEM, FIRST, ANSWER, SECOND = "Be brief.", "Guess a number.", "7", "Higher."


@dataclass(frozen=True)
class TemplateDifference:
    """One place where the processor's text differs from the template's."""

    where: str
    template: str
    processor: str

    def __str__(self) -> str:
        return f"{self.where}: template renders {self.template!r}, processor {self.processor!r}"


def template_differences(
    tokenizer: PreTrainedTokenizerBase, processor: Processor, template_kwargs: dict[str, Any] | None = None
) -> list[TemplateDifference]:
    """Where ``processor`` renders the prompt or a turn boundary differently from ``tokenizer``'s template.

    Args:
        tokenizer: a tokenizer with a chat template.
        processor: the processor to compare; it must be :class:`~trl_env.core.TurnDelimited`.
        template_kwargs: extra template arguments (``{"enable_thinking": False}``); defaults to the
            processor's own ``template_kwargs`` where it has them.

    Returns:
        The differences, empty when the processor renders as the template does.
    """
    require_turn_delimited(processor)
    if template_kwargs is None:
        template_kwargs = processor.template_kwargs if isinstance(processor, ChunkedProcessor) else {}
    kwargs = dict(template_kwargs)
    # an answer prefix (with_answer_prefix) opens every model turn on purpose: expected after the prompt
    prefix = processor.answer_prefix if isinstance(processor, ChunkedProcessor) else ""

    def render(messages: list[dict[str, str]]) -> str:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kwargs) + prefix

    boundary = processor.turn_end + processor.after_turn_end + processor.append_user_input(SECOND)
    history = [
        {"role": "user", "content": FIRST},
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": SECOND},
    ]
    differences = []
    for system in ("", SYSTEM):
        suffix = " (with a system prompt)" if system else ""
        opening = [{"role": "system", "content": system}] if system else []
        try:
            expected_prompt = render([*opening, {"role": "user", "content": FIRST}])
            expected_history = render([*opening, *history])
        except Exception:  # the template rejects system messages: so does a processor without a system role
            continue
        try:
            prompt = processor.init_system_input(system) + processor.append_user_input(FIRST)
        except ValueError:
            continue  # the processor has no system role and says so
        if prompt != expected_prompt:
            differences.append(TemplateDifference("prompt" + suffix, expected_prompt, prompt))
        after_answer = expected_history.rsplit(ANSWER, 1)[-1]
        if after_answer != boundary:
            differences.append(TemplateDifference("turn boundary" + suffix, after_answer, boundary))
    return differences
