"""Derive a processor from a tokenizer's own chat template.

The template is rendered on small sentinel conversations and cut at the sentinels:

* ``[user U1]`` with a generation prompt gives the bare prefix, the user prefix and the
  user suffix (which ends with the generation prompt);
* ``[system S, user U1, assistant A1, user U2]`` gives the end-of-turn token (the special
  token right after ``A1``), what the template puts after it, and the system block.

A template whose generation prompt does not reappear in the history (DeepSeek-R1 prefills
``<think>\\n``; Qwen3 with thinking off prefills an empty think block) cannot be chunked:
:class:`ChunkingError` says why and names the preset to use instead.

Example:
    >>> processor = ChatTemplateProcessor(tokenizer)
    >>> processor.append_user_input("Hi")
    '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

import copy
import os
from typing import TYPE_CHECKING, Any

from trl_env.chat.chunked_processor import ChunkedProcessor
from trl_env.chat.chunks import ChatChunks, special_token_strings
from trl_env.chat.parsing import parse_with_response_template
from trl_env.chat.presets import GEMMA4_THOUGHT, THINK
from trl_env.chat.tool_formats import format_of_template
from trl_env.core import ParsedOutput
from trl_env.errors import TemplateError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase

SYSTEM, USER_1, ASSISTANT_1, USER_2 = "SYSTEMQXZ", "USERONEQXZ", "ASSISTANTONEQXZ", "USERTWOQXZ"
PADDED_USER = " \nUSERPADQXZ \n"


class ChunkingError(TemplateError):
    """The chat template cannot be cut into additive chunks."""


class _Renderer:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, template_kwargs: dict[str, Any]) -> None:
        self.tokenizer = tokenizer
        self.kwargs = template_kwargs
        self.parts_content = False
        probe = self([{"role": "user", "content": USER_1}], True)
        if USER_1 not in probe:
            self.parts_content = True  # multimodal templates (SmolVLM, Idefics3) read a list of typed parts

    def __call__(self, messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        if self.parts_content:
            messages = [{"role": m["role"], "content": [{"type": "text", "text": m["content"]}]} for m in messages]
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt, **self.kwargs
        )


def _split_at(text: str, sentinel: str, what: str) -> tuple[str, str]:
    if text.count(sentinel) != 1:
        raise ChunkingError(f"the chat template renders the {what} {text.count(sentinel)} times, expected once")
    before, after = text.split(sentinel)
    return before, after


def derive_chunks(
    tokenizer: PreTrainedTokenizerBase, template_kwargs: dict[str, Any] | None = None, *, per_turn: bool = False
) -> ChatChunks:
    """Cut the tokenizer's chat template into :class:`ChatChunks`.

    ``per_turn=True`` (``history="template"``/``"window"``, where the template renders every prompt itself) skips
    the two checks that only a single growing sequence needs: the generation prompt may be rendered differently in
    the history (DeepSeek-R1, Qwen3.5), and the chunks then serve only to end and parse a turn.

    Example:
        >>> derive_chunks(tokenizer).turn_end
        '<|im_end|>'
    """
    if not tokenizer.chat_template:
        raise ChunkingError("the tokenizer has no chat template; set tokenizer.chat_template or use a preset")
    render = _Renderer(tokenizer, template_kwargs or {})
    specials = special_token_strings(tokenizer)

    one = render([{"role": "user", "content": USER_1}], True)
    opening, generation_suffix = _split_at(one, USER_1, "user message")

    history = [
        {"role": "user", "content": USER_1},
        {"role": "assistant", "content": ASSISTANT_1},
        {"role": "user", "content": USER_2},
    ]
    has_system_role = True
    try:
        two = render([{"role": "system", "content": SYSTEM}, *history], True)
    except Exception:
        has_system_role = False
        two = render(history, True)
    _, rest = _split_at(two, USER_1, "first user message")
    history_generation, rest = _split_at(rest, ASSISTANT_1, "assistant message")
    between_turns, last_suffix = _split_at(rest, USER_2, "second user message")

    remainder = history_generation[len(generation_suffix) :]
    if not per_turn and (not history_generation.startswith(generation_suffix) or remainder.strip()):
        raise ChunkingError(
            f"the generation prompt {generation_suffix!r} is not re-rendered in the history "
            f"(history shows {history_generation!r} before an assistant message), so a multi-turn sequence "
            "cannot be built from per-turn chunks; use a preset processor instead: `--preset qwen3_nothink` "
            "(or deepseek_r1, ...) on the trl-env command line, trl_env.chat.presets.preset('qwen3_nothink') "
            "in Python (the names: trl_env.chat.presets.PRESETS)"
        )
    if not per_turn and last_suffix != generation_suffix:
        raise ChunkingError(f"later turns end with {last_suffix!r} but the first with {generation_suffix!r}")

    turn_end = next((s for s in specials if between_turns.startswith(s)), None)
    if turn_end is None:
        raise ChunkingError(
            f"the assistant turn is not closed by a special token (template shows {between_turns!r} after it); "
            "the end of a model turn must be a special token to cut chunks there"
        )
    after_end = between_turns[len(turn_end) :]
    cut = min((i for i in (after_end.find(s) for s in specials) if i >= 0), default=0)
    after_turn_end, user_prefix = after_end[:cut], after_end[cut:]

    if not opening.endswith(user_prefix):  # plain-text role headers (SmolVLM's "\nUser: "): cut where they agree
        user_prefix = os.path.commonprefix([opening[::-1], after_end[::-1]])[::-1]
        after_turn_end = after_end[: len(after_end) - len(user_prefix)]
    if not user_prefix or not opening.endswith(user_prefix):
        raise ChunkingError(f"the first user turn opens with {opening!r}, later ones with {user_prefix!r}")
    bare_prefix = opening[: len(opening) - len(user_prefix)]

    system_prefix = system_suffix = ""
    if has_system_role:
        system_prefix, after_system = _split_at(two, SYSTEM, "system message")
        between = after_system.split(USER_1)[0]
        if between.endswith(user_prefix):
            system_suffix = between[: len(between) - len(user_prefix)]
        else:
            has_system_role = False  # the template folds the system prompt into the first user turn

    padded = render([{"role": "user", "content": PADDED_USER}], True)
    strips_content = PADDED_USER not in padded and PADDED_USER.strip() in padded

    return ChatChunks(
        bare_prefix=bare_prefix,
        system_prefix=system_prefix,
        system_suffix=system_suffix,
        user_prefix=user_prefix,
        user_suffix=generation_suffix,
        turn_end=turn_end,
        after_turn_end=after_turn_end,
        has_system_role=has_system_role,
        strips_content=strips_content,
    )


def _think_markers(chat_template: str) -> tuple[str, str] | None:
    for markers in (THINK, GEMMA4_THOUGHT):
        if all(marker.strip() in chat_template for marker in markers):
            return markers
    return None


class ChatTemplateProcessor(ChunkedProcessor):
    """A processor whose chunks come from ``tokenizer``'s own chat template.

    ``thinking`` is passed to the template as ``enable_thinking`` (only where the template
    reads it). Answers are parsed with ``tokenizer.parse_response``; a tokenizer without a
    response template gets one from TRL's known families, and failing that, answers are
    split on the family's thinking markers. ``per_turn=True`` builds the processor of
    ``history="template"``/``"window"``, which accepts every template (see :func:`derive_chunks`).

    Example:
        >>> processor = ChatTemplateProcessor(tokenizer)
        >>> processor.parse_agent_output("<think>plan</think>\\n\\n42")
        ('plan', '42')
    """

    def __init__(
        self, tokenizer: PreTrainedTokenizerBase, *, thinking: bool | None = None, per_turn: bool = False
    ) -> None:
        template = tokenizer.chat_template or ""
        template_kwargs: dict[str, Any] = {}
        if thinking is not None:
            if "enable_thinking" not in template:
                raise TemplateError("thinking= was given but this chat template has no enable_thinking switch")
            template_kwargs["enable_thinking"] = thinking
        super().__init__(
            derive_chunks(tokenizer, template_kwargs, per_turn=per_turn),
            think_markers=_think_markers(template),
            template_kwargs=template_kwargs,
            tool_format=format_of_template(template),  # when the tokenizer has no response template
        )
        self.tokenizer = _with_response_template(tokenizer)
        self.thinking = thinking

    def parse(self, completion: str) -> ParsedOutput:
        """Parse with the response template, falling back to thinking markers.

        Example:
            >>> ChatTemplateProcessor(tokenizer).parse("<think>a</think>b")
            ParsedOutput(reasoning='a', action='b', ok=True)
        """
        if getattr(self.tokenizer, "response_template", None) is not None:
            prefix = self.chunks.user_suffix
            parsed = parse_with_response_template(self.tokenizer, completion, prefix, self.chunks.turn_end)
            if parsed is not None and self._well_formed(completion):
                return parsed
        return super().parse(completion)

    def _well_formed(self, completion: str) -> bool:
        if self.think_markers is None:
            return True
        think_open, think_close = self.think_markers
        opened = self.generation_opens_thinking or completion.lstrip().startswith(think_open)
        return not opened or think_close in completion


def _with_response_template(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    if getattr(tokenizer, "response_template", None) is not None:
        return tokenizer
    from trl.chat_template_utils import add_response_schema

    candidate = copy.copy(tokenizer)
    try:
        return add_response_schema(candidate)
    except ValueError:
        return tokenizer
