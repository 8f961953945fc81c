"""Render tool declarations and tool results exactly as the chat template does, chunk by chunk.

Two chunks of a tool env's episode come from the template itself (``apply_chat_template``), not
from the processor's fixed chunks:

* the **prompt with tools**: ``[system?, user]`` rendered with ``tools=``; the template puts the
  declarations where it wants them (Qwen: the system turn; Llama 3.x: the first user turn);
* the **tool chunk** after a model turn that called tools: the end of that turn onwards, i.e. the
  ``tool`` messages (and, optionally, a user message) and the generation prompt. Like TRL's
  ``_get_tool_suffix_ids``, it is cut from a small conversation whose assistant message calls the
  first result's tool, after that message's end-of-turn token.

The env's texts (system prompt, delta, tool results) are placed by rendering sentinels; each one's
own rendering (Llama writes a tool result as a JSON string) comes from rendering it alone, and the
assembled chunk is checked against the template's rendering of the real texts. Env texts are then
tokenized with special-token matching off (:meth:`~trl_env.chat.chunk_encoder.ChunkEncoder.encode_parts`),
so a tool result cannot forge a special token.

Example:
    >>> turns = ToolTurns(encoder)
    >>> ids, text = turns.tool_chunk([ToolResult("add", "5")], "", close_turn=False)
    >>> text
    '\\n<|im_start|>user\\n<tool_response>\\n5\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trl_env.chat.chunked_processor import ChunkedProcessor
from trl_env.core import ToolResult
from trl_env.errors import ConfigError, DataError, TemplateError

if TYPE_CHECKING:
    from trl_env.chat.chunk_encoder import ChunkEncoder

SYSTEM, USER, ARGUMENT = "SYSTEMTOOLQXZ", "USERTOOLQXZ", "ARGUMENTQXZ"


def _sentinel(index: int) -> str:
    return f"RESULTQXZ{index}QXZ"


class ToolTurns:
    """Template-rendered chunks of tool episodes, for one tokenizer and processor."""

    def __init__(self, encoder: ChunkEncoder) -> None:
        self.encoder = encoder
        self.tokenizer = encoder.tokenizer
        if not self.tokenizer.chat_template:
            raise TemplateError("a tool env needs a tokenizer whose chat template renders tools and tool messages")
        processor = encoder.processor
        self.template_kwargs: dict[str, Any] = (
            dict(processor.template_kwargs) if isinstance(processor, ChunkedProcessor) else {}
        )
        self._layouts: dict[tuple[str, int, bool], list[str]] = {}

    def render(self, messages: list[dict[str, Any]], tools: Sequence[dict] | None, generation: bool) -> str:
        """The template's text for ``messages`` (with the processor's template arguments, e.g. ``enable_thinking``)."""
        return self.tokenizer.apply_chat_template(
            messages, tools=list(tools) if tools else None, tokenize=False, add_generation_prompt=generation,
            **self.template_kwargs,
        )  # fmt: skip

    # --- the prompt ---------------------------------------------------------------------------------

    def prompt(self, system_prompt: str, delta: str, tools: Sequence[dict]) -> tuple[list[int], str]:
        """Ids and text of an episode's first prompt with ``tools`` declared as the template does.

        Example:
            >>> schema = {"type": "function", "function": {"name": "add", "parameters": {}}}
            >>> ids, text = ToolTurns(encoder).prompt("", "Add 2 and 3.", [schema])
            >>> text.startswith("<|im_start|>system\\n# Tools")
            True
            >>> text.endswith("Add 2 and 3.<|im_end|>\\n<|im_start|>assistant\\n")
            True
        """
        self._check_declarations(tools)
        opening = [{"role": "system", "content": SYSTEM}] if system_prompt else []
        layout = self.render([*opening, {"role": "user", "content": USER}], tools, True)
        head, tail = _split_once(layout, USER, "the user message of the prompt")
        if not tail == self.encoder.generation_prompt_tail:
            raise TemplateError(
                f"with tools the chat template ends the prompt with {tail!r}, the processor with "
                f"{self.encoder.generation_prompt_tail!r}: use the processor cut from this template"
            )
        parts: list[tuple[str, bool]] = []
        if system_prompt:
            before, head = _split_once(head, SYSTEM, "the system message of the prompt")
            parts += [(before, True), (self._rendered_system(system_prompt), False)]
        parts += [(head, True), (self._rendered_user(delta), False), (tail, True)]
        text = "".join(part for part, _ in parts)
        actual = self.render([*self._opening(system_prompt), {"role": "user", "content": delta}], tools, True)
        if text != actual:
            raise TemplateError(f"could not place the env's text in the template's prompt: {actual!r} != {text!r}")
        return self.encoder.encode_parts(parts), text

    def _opening(self, system_prompt: str) -> list[dict[str, str]]:
        return [{"role": "system", "content": system_prompt}] if system_prompt else []

    def _rendered_system(self, text: str) -> str:
        return self.encoder.system_content(text)  # as the processor writes it (Llama trims), checked below

    def _rendered_user(self, text: str) -> str:
        return self.encoder.user_content(text)

    def _check_declarations(self, tools: Sequence[dict]) -> None:
        # Declarations are the env author's code, rendered as trusted template text: they must not spell
        # a special token (a docstring holding "<|im_end|>" would end the system turn).
        text = json.dumps(list(tools), ensure_ascii=False)
        for special in self.encoder.special_tokens:
            if special in text:
                raise ConfigError(f"a tool declaration spells the special token {special!r}; rename or reword it")

    # --- the tool chunk ----------------------------------------------------------------------------

    def tool_chunk(self, results: Sequence[ToolResult], delta: str, *, close_turn: bool) -> tuple[list[int], str]:
        """Ids and text of the env chunk after a model turn that called tools.

        ``close_turn`` prepends the end-of-turn token (the model stopped without it); a non-empty
        ``delta`` follows the tool messages as a user message.

        Example:
            >>> results = [ToolResult("add", "5"), ToolResult("add", "{'error': 'no b'}")]
            >>> print(ToolTurns(encoder).tool_chunk(results, "", close_turn=False)[1])
            <BLANKLINE>
            <|im_start|>user
            <tool_response>
            5
            </tool_response>
            <tool_response>
            {'error': 'no b'}
            </tool_response><|im_end|>
            <|im_start|>assistant
            <BLANKLINE>
        """
        if not results:
            raise DataError("tool_chunk needs at least one tool result")
        name = results[0].name
        markup = self._layout(name, len(results), bool(delta))
        parts: list[tuple[str, bool]] = [((self.encoder.turn_end if close_turn else "") + markup[0], True)]
        for index, result in enumerate(results):
            parts += [(self._rendered_result(result), False), (markup[index + 1], True)]
        if delta:
            parts[-1:] = [(markup[-2], True), (self._rendered_user(delta), False), (markup[-1], True)]
        text = "".join(part for part, _ in parts)
        actual = self._after_call(self._conversation(name, [r.content for r in results], delta))
        expected = (self.encoder.turn_end if close_turn else "") + actual
        if text != expected:
            raise TemplateError(
                f"could not place the tool results in the template's rendering: {expected!r} != {text!r}"
            )
        return self.encoder.encode_parts(parts), text

    def _conversation(self, name: str, contents: Sequence[str], delta: str) -> list[dict[str, Any]]:
        call = {"type": "function", "function": {"name": name, "arguments": {"trl_env": ARGUMENT}}}
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "Call a tool."},
            {"role": "assistant", "content": "", "tool_calls": [call]},
        ]
        messages += [{"role": "tool", "name": name, "content": content} for content in contents]
        if delta:
            messages.append({"role": "user", "content": delta})
        return messages

    def _after_call(self, messages: list[dict[str, Any]]) -> str:
        """The template's text after the calling assistant message's end-of-turn token."""
        full = self.render(messages, None, True)
        position = full.find(ARGUMENT)
        end = full.find(self.encoder.turn_end, position)
        if position < 0 or end < 0:
            raise TemplateError(
                "the chat template does not render an assistant tool call followed by its end-of-turn token "
                f"{self.encoder.turn_end!r}; it cannot be used with a tool env"
            )
        return full[end + len(self.encoder.turn_end) :]

    def _layout(self, name: str, count: int, with_delta: bool) -> list[str]:
        """The markup around ``count`` tool results (and a user message): the sentinel rendering, cut (cached)."""
        key = (name, count, with_delta)
        if key not in self._layouts:
            sentinels = [_sentinel(i) for i in range(count)]
            text = self._after_call(self._conversation(name, sentinels, USER if with_delta else ""))
            markup = []
            for sentinel in [*sentinels, *([USER] if with_delta else [])]:
                before, text = _split_once(text, sentinel, "a tool result")
                markup.append(before)
            self._layouts[key] = [*markup, text]
        return self._layouts[key]

    def _rendered_result(self, result: ToolResult) -> str:
        """How the template writes one tool result's content (as is for Qwen; a JSON string for Llama 3.x)."""
        layout = self._layout(result.name, 1, False)
        text = self._after_call(self._conversation(result.name, [result.content], ""))
        if not (text.startswith(layout[0]) and text.endswith(layout[1])):
            raise TemplateError(f"the chat template renders the tool result {result.content!r:.60} unexpectedly")
        return text[len(layout[0]) : len(text) - len(layout[1])]


def _split_once(text: str, sentinel: str, what: str) -> tuple[str, str]:
    if text.count(sentinel) != 1:
        raise TemplateError(f"the chat template renders {what} {text.count(sentinel)} times, expected once")
    before, after = text.split(sentinel)
    return before, after
