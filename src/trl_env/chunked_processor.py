"""A processor defined by its :class:`~trl_env.chat_chunks.ChatChunks` and thinking markers.

Both the automatic :class:`~trl_env.chat_template_processor.ChatTemplateProcessor` and the
hand-written presets in :mod:`trl_env.presets` are ``ChunkedProcessor`` objects. The rollout
engine reads ``chunks.turn_end`` and ``chunks.after_turn_end`` from them; any other object
satisfying the :class:`~trl_env.core.Processor` protocol works too, with the tokenizer's
EOS as the end-of-turn token and nothing after it.

Example:
    >>> from trl_env.presets import qwen3_nothink_chunks
    >>> processor = ChunkedProcessor(qwen3_nothink_chunks(), think_markers=("<think>", "</think>"))
    >>> processor.parse_agent_output("<think>\\n\\n</think>\\n\\n42")
    ('', '42')
"""

from __future__ import annotations

from trl_env.chat_chunks import ChatChunks
from trl_env.parsing import ParsedOutput, split_on_markers


class ChunkedProcessor:
    """Renders env text with fixed chunks; parses answers by thinking markers."""

    def __init__(self, chunks: ChatChunks, *, think_markers: tuple[str, str] | None = None, name: str = "") -> None:
        self.chunks = chunks
        self.think_markers = think_markers
        self.name = name or type(self).__name__

    @property
    def generation_opens_thinking(self) -> bool:
        """True when the generation prompt ends inside an open thinking block (e.g. ``<think>\\n``)."""
        if self.think_markers is None:
            return False
        return self.chunks.user_suffix.rstrip().endswith(self.think_markers[0])

    def init_system_input(self, prompt: str) -> str:
        """The conversation's opening for ``prompt`` (empty: no system block).

        Example:
            >>> from trl_env.presets import qwen3_nothink_chunks
            >>> ChunkedProcessor(qwen3_nothink_chunks()).init_system_input("Be brief.")
            '<|im_start|>system\\nBe brief.<|im_end|>\\n'
        """
        return self.chunks.system(prompt)

    def append_user_input(self, prompt: str) -> str:
        """A user turn with ``prompt`` followed by the generation prompt.

        Example:
            >>> from trl_env.presets import qwen3_nothink_chunks
            >>> ChunkedProcessor(qwen3_nothink_chunks()).append_user_input("Hi")
            '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n'
        """
        return self.chunks.user(prompt)

    def parse(self, completion: str) -> ParsedOutput:
        """Parse one model turn (text without the end-of-turn token), flagging malformed output.

        Example:
            >>> from trl_env.presets import qwen3_5_thinking_chunks  # the prompt opens <think>
            >>> ChunkedProcessor(qwen3_5_thinking_chunks(), think_markers=("<think>", "</think>")).parse("x</think>y")
            ParsedOutput(reasoning='x', action='y', ok=True)
        """
        if self.think_markers is None:
            return ParsedOutput("", completion.strip(), True)
        think_open, think_close = self.think_markers
        return split_on_markers(completion, think_open, think_close, opened=self.generation_opens_thinking)

    def parse_agent_output(self, completion: str) -> tuple[str, str]:
        """``(reasoning, action)`` of one model turn.

        Example:
            >>> from trl_env.presets import qwen3_nothink_chunks
            >>> ChunkedProcessor(qwen3_nothink_chunks()).parse_agent_output(" 42 ")
            ('', '42')
        """
        reasoning, action, _ = self.parse(completion)
        return reasoning, action

    def __repr__(self) -> str:
        return f"{self.name}({self.chunks!r})"
