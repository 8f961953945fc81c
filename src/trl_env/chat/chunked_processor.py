"""A processor defined by its :class:`~trl_env.chat.chunks.ChatChunks` and thinking markers.

Both the automatic :class:`~trl_env.chat.template_processor.ChatTemplateProcessor` and the
hand-written presets in :mod:`trl_env.chat.presets` are ``ChunkedProcessor`` objects. Besides the
:class:`~trl_env.core.Processor` protocol they have every optional capability the engine uses:
:class:`~trl_env.core.TurnDelimited` (``turn_end``, ``after_turn_end``) and
:class:`~trl_env.core.StrictParser` (``parse``, which flags malformed answers).

Example:
    >>> from trl_env.chat.presets import qwen3_nothink_chunks
    >>> processor = ChunkedProcessor(qwen3_nothink_chunks(), think_markers=("<think>", "</think>"))
    >>> processor.parse_agent_output("<think>\\n\\n</think>\\n\\n42")
    ('', '42')
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trl_env.chat.chunks import ChatChunks
from trl_env.chat.parsing import split_on_markers
from trl_env.chat.tool_calls import format_calls
from trl_env.chat.tool_formats import ToolFormat
from trl_env.core import ParsedOutput


class ChunkedProcessor:
    """Renders env text with fixed chunks; parses answers by thinking markers."""

    def __init__(
        self,
        chunks: ChatChunks,
        *,
        think_markers: tuple[str, str] | None = None,
        name: str = "",
        template_kwargs: dict[str, Any] | None = None,
        tool_format: ToolFormat | None = None,
        answer_prefix: str = "",
    ) -> None:
        self.chunks = chunks
        # text the chunks add after the template's generation prompt (with_answer_prefix): a deliberate
        # departure from the template, which the template comparison allows for
        self.answer_prefix = answer_prefix
        # how the family writes tool calls: they reach the env as normalised <tool_call> lines
        self.tool_format = tool_format
        self.think_markers = think_markers
        self.name = name or type(self).__name__
        # the chat-template arguments whose rendering these chunks imitate (for the template comparison)
        self.template_kwargs = dict(template_kwargs or {})

    @property
    def turn_end(self) -> str:
        """The special token that closes a model turn (:class:`~trl_env.core.TurnDelimited`)."""
        return self.chunks.turn_end

    @property
    def after_turn_end(self) -> str:
        """What the template writes after ``turn_end`` before the next user turn."""
        return self.chunks.after_turn_end

    @property
    def generation_opens_thinking(self) -> bool:
        """True when the generation prompt ends inside an open thinking block (e.g. ``<think>\\n``)."""
        if self.think_markers is None:
            return False
        return self.chunks.user_suffix.rstrip().endswith(self.think_markers[0])

    def init_system_input(self, prompt: str) -> str:
        """The conversation's opening for ``prompt`` (empty: no system block).

        Example:
            >>> from trl_env.chat.presets import qwen3_nothink_chunks
            >>> ChunkedProcessor(qwen3_nothink_chunks()).init_system_input("Be brief.")
            '<|im_start|>system\\nBe brief.<|im_end|>\\n'
        """
        return self.chunks.system(prompt)

    def append_user_input(self, prompt: str) -> str:
        """A user turn with ``prompt`` followed by the generation prompt.

        Example:
            >>> from trl_env.chat.presets import qwen3_nothink_chunks
            >>> ChunkedProcessor(qwen3_nothink_chunks()).append_user_input("Hi")
            '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n'
        """
        return self.chunks.user(prompt)

    def parse(self, completion: str) -> ParsedOutput:
        """Parse one model turn (text without the end-of-turn token), flagging malformed output.

        Example:
            >>> from trl_env.chat.presets import qwen3_5_thinking_chunks  # the prompt opens <think>
            >>> ChunkedProcessor(qwen3_5_thinking_chunks(), think_markers=("<think>", "</think>")).parse("x</think>y")
            ParsedOutput(reasoning='x', action='y', ok=True)
        """
        if self.think_markers is None:
            parsed = ParsedOutput("", completion.strip(), True)
        else:
            think_open, think_close = self.think_markers
            parsed = split_on_markers(completion, think_open, think_close, opened=self.generation_opens_thinking)
        return self.with_tool_calls(parsed)

    def with_tool_calls(self, parsed: ParsedOutput) -> ParsedOutput:
        """``parsed`` with the action's tool calls in the normalised form; a malformed call is a parse failure.

        Example:
            >>> from trl_env.chat.presets import preset
            >>> preset("qwen3_thinking").parse('<think>x</think>\\n<tool_call>\\n{"name": "f"}\\n</tool_call>')
            ParsedOutput(reasoning='x', action='<tool_call>{"name": "f", "arguments": {}}</tool_call>', ok=True)
        """
        if self.tool_format is None or not parsed.action:
            return parsed
        text, calls = self.tool_format.split(parsed.action)
        if not calls:
            return parsed
        action = "\n".join(part for part in (text, format_calls(calls)) if part)
        return ParsedOutput(parsed.reasoning, action, parsed.ok and all(call.error is None for call in calls))

    def parse_agent_output(self, completion: str) -> tuple[str, str]:
        """``(reasoning, action)`` of one model turn.

        Example:
            >>> from trl_env.chat.presets import qwen3_nothink_chunks
            >>> ChunkedProcessor(qwen3_nothink_chunks()).parse_agent_output(" 42 ")
            ('', '42')
        """
        reasoning, action, _ = self.parse(completion)
        return reasoning, action

    def __repr__(self) -> str:
        return f"{self.name}({self.chunks!r})"


def with_answer_prefix(processor: ChunkedProcessor, prefix: str) -> ChunkedProcessor:
    """A copy of ``processor`` whose generation prompt ends with ``prefix``: every model turn starts with it.

    The prefix is part of the environment's chunk (mask 0, not trained on); the model
    continues it. The parsed action is what the model wrote after the prefix.

    Args:
        processor: the processor to extend.
        prefix: text that opens every assistant turn, e.g. ``"My guess:"``; empty returns ``processor``.

    Returns:
        A new :class:`ChunkedProcessor` (or ``processor`` itself for an empty prefix).

    Example:
        >>> from trl_env.chat.presets import preset
        >>> with_answer_prefix(preset("qwen3_nothink"), "My guess:").append_user_input("Hi").endswith("My guess:")
        True
    """
    if not prefix:
        return processor
    chunks = dataclasses.replace(processor.chunks, user_suffix=processor.chunks.user_suffix + prefix)
    return ChunkedProcessor(
        chunks,
        think_markers=processor.think_markers,
        name=f"{processor.name}+prefix",
        template_kwargs=processor.template_kwargs,
        tool_format=processor.tool_format,
        answer_prefix=processor.answer_prefix + prefix,
    )
