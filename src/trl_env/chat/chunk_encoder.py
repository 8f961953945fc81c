"""Tokenize environment chunks so that environment text can never forge special tokens.

A chunk is ``markup + delta + markup``: the processor's markup may contain special tokens
(``<|im_start|>``), the environment's ``delta`` may not. The chunk is cut at the markup's
special tokens; every remaining span (markup text merged with the delta) is tokenized with
special-token matching off. When the delta spells no special token this equals the plain
tokenization of the whole chunk, which is what :mod:`trl_env.checks.additivity` checks.

Non-special added tokens (Qwen3's ``<think>``, ``<tool_response>``) are ordinary vocabulary
and keep their ids in environment text too: they cannot end a turn.

Example:
    >>> encoder = ChunkEncoder(tokenizer, processor)
    >>> ids, text = encoder.user_turn("<|im_end|>", close_turn=False)  # env text spelling a special token
    >>> tokenizer.convert_tokens_to_ids("<|im_end|>") in ids[4:-5]  # ... stays plain text
    False
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trl_env.chat.chunks import special_token_strings
from trl_env.chat.tool_turns import ToolTurns
from trl_env.chat.turn_end import TurnEnd
from trl_env.core import Processor, ToolResult
from trl_env.errors import TemplateError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase

PLACEHOLDER = "\x00TRLENV\x00"


class ChunkEncoder:
    """Builds and tokenizes the prompt and the environment chunks of episodes."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, processor: Processor) -> None:
        self.tokenizer = tokenizer
        self.processor = processor
        self.ending = TurnEnd.of(processor, tokenizer)  # refuses a processor that cannot say how its turn ends
        self.turn_end: str = self.ending.text
        self.after_turn_end: str = self.ending.after
        self.turn_end_id: int = self.ending.id
        self._special_ids = {s: tokenizer.convert_tokens_to_ids(s) for s in special_token_strings(tokenizer)}
        self.special_tokens: list[str] = list(self._special_ids)
        self._tool_turns: ToolTurns | None = None
        self._markup_cache: dict[str, list[int]] = {}
        self._pieces_cache: dict[str, list[str | int]] = {}
        pattern = "|".join(re.escape(s) for s in self._special_ids)
        self._special_pattern = re.compile(pattern) if pattern else None
        self._user_prefix, self._user_suffix = self._split_template(processor.append_user_input, "append_user_input")
        try:
            self._system_prefix, self._system_suffix = self._split_template(processor.init_system_input, "system")
        except ValueError:  # a template without a system role: init_system_input raises for any prompt
            self._system_prefix = self._system_suffix = ""

    @property
    def generation_prompt_tail(self) -> str:
        """The end of the generation prompt: the text a model's answer directly follows."""
        return self._user_suffix

    @staticmethod
    def _split_template(render, name: str) -> tuple[str, str]:
        text = render(PLACEHOLDER)
        if text.count(PLACEHOLDER) != 1:
            raise TemplateError(f"processor.{name}(text) must contain the text exactly once; got {text!r}")
        prefix, suffix = text.split(PLACEHOLDER)
        return prefix, suffix

    def _content(self, render, prefix: str, suffix: str, text: str) -> str:
        full = render(text)
        if not (full.startswith(prefix) and full.endswith(suffix) and len(full) >= len(prefix) + len(suffix)):
            raise TemplateError(f"processor output {full!r} does not keep the markup {prefix!r} ... {suffix!r}")
        return full[len(prefix) : len(full) - len(suffix)]

    def encode_markup(self, markup: str) -> list[int]:
        """Tokenize trusted markup, special tokens included.

        Example:
            >>> encoder.encode_markup("<|im_start|>user\\n")
            [151644, 872, 198]
        """
        return self.encode(markup, "", "")

    def encode(self, before: str, untrusted: str, after: str) -> list[int]:
        """Tokenize ``before + untrusted + after``; special tokens are recognised only in the markup.

        Markup-only pieces are the same in every chunk, so their ids are computed once and reused;
        only the piece holding ``untrusted`` goes to the tokenizer each time.

        Example:
            >>> encoder.encode("<|im_start|>user\\n", "<|im_end|>", "<|im_end|>")[-1]
            151645
        """
        head = self._pieces(before)
        tail = self._pieces(after)
        text_tail = head[-1] if head and isinstance(head[-1], str) else ""
        text_head = tail[0] if tail and isinstance(tail[0], str) else ""
        ids: list[int] = []
        for piece in head[: len(head) - 1] if text_tail else head:
            ids.extend(self._markup_ids(piece))
        middle = text_tail + untrusted + text_head
        if middle:
            ids.extend(self._encode_text(middle))
        for piece in tail[1:] if text_head else tail:
            ids.extend(self._markup_ids(piece))
        return ids

    def encode_parts(self, parts: list[tuple[str, bool]]) -> list[int]:
        """Tokenize a chunk given as ``(text, trusted)`` parts; special tokens count only in trusted parts.

        Text on either side of a special token is tokenized as one run, so the ids equal those of the
        joined text when no untrusted part spells a special token (:meth:`encode` with many spans).

        Example:
            >>> ids = encoder.encode_parts([("<|im_start|>user\\n", True), ("<|im_end|>", False), ("<|im_end|>", True)])
            >>> ids == encoder.encode("<|im_start|>user\\n", "<|im_end|>", "<|im_end|>")
            True
        """
        ids: list[int] = []
        run = ""
        for text, trusted in parts:
            if not trusted:
                run += text
                continue
            for piece in self._pieces(text):
                if isinstance(piece, str):
                    run += piece
                    continue
                if run:
                    ids.extend(self._encode_text(run))
                    run = ""
                ids.append(piece)
        if run:
            ids.extend(self._encode_text(run))
        return ids

    def _encode_text(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)

    def _markup_ids(self, piece: str | int) -> list[int]:
        if isinstance(piece, int):
            return [piece]
        ids = self._markup_cache.get(piece)
        if ids is None:
            if len(self._markup_cache) >= 1024:  # markup comes from the processor: a handful of strings
                self._markup_cache.clear()
            ids = self._markup_cache[piece] = self._encode_text(piece)
        return ids

    def _pieces(self, markup: str) -> list[str | int]:
        """``markup`` cut at its special tokens: text spans and special-token ids, in order (cached)."""
        pieces = self._pieces_cache.get(markup)
        if pieces is None:
            pieces = []
            self._cut(markup, pieces)
            if len(self._pieces_cache) >= 1024:
                self._pieces_cache.clear()
            self._pieces_cache[markup] = pieces
        return pieces

    def _cut(self, markup: str, pieces: list[str | int]) -> None:
        position = 0
        if self._special_pattern is not None:
            for match in self._special_pattern.finditer(markup):
                if match.start() > position:
                    pieces.append(markup[position : match.start()])
                pieces.append(self._special_ids[match.group()])
                position = match.end()
        if position < len(markup):
            pieces.append(markup[position:])

    def truncate(self, delta: str, max_tokens: int) -> str:
        """Cut ``delta`` to ``max_tokens`` tokens (as plain text), marking how much was dropped.

        Example:
            >>> encoder.truncate("word " * 1000, 10)
            'word word word word word word word word word word\\n[... 991 tokens truncated]'

        """
        if len(delta) <= max_tokens:  # a token is at least one character
            return delta
        ids = self.tokenizer.encode(delta, add_special_tokens=False, split_special_tokens=True)
        if len(ids) <= max_tokens:
            return delta
        kept = self.tokenizer.decode(ids[:max_tokens], clean_up_tokenization_spaces=False)
        return f"{kept}\n[... {len(ids) - max_tokens} tokens truncated]"

    def user_content(self, delta: str) -> str:
        """``delta`` as the processor writes it inside a user turn (templates that trim content trim it).

        Example:
            >>> encoder.user_content(" 7 ")
            ' 7 '
        """
        return self._content(self.processor.append_user_input, self._user_prefix, self._user_suffix, delta)

    def system_content(self, prompt: str) -> str:
        """``prompt`` as the processor writes it inside the system turn."""
        return self._content(self.processor.init_system_input, self._system_prefix, self._system_suffix, prompt)

    @property
    def tool_turns(self) -> ToolTurns:
        """The template-rendered chunks of tool envs (built on first use: needs the tokenizer's chat template)."""
        if self._tool_turns is None:
            self._tool_turns = ToolTurns(self)
        return self._tool_turns

    def prompt(self, system_prompt: str, delta: str, tools: Sequence[dict] = ()) -> tuple[list[int], str]:
        """Ids and text of an episode's prompt: the system block and the first user turn.

        ``tools`` (JSON schemas, from a :class:`~trl_env.core.UsesTools` env) are declared as the chat
        template declares them (:meth:`~trl_env.chat.tool_turns.ToolTurns.prompt`).

        Example:
            >>> ids, text = encoder.prompt("", "Hi")
        """
        if tools:
            return self.tool_turns.prompt(system_prompt, delta, tools)
        if system_prompt:
            render = self.processor.init_system_input  # raises the processor's own error where unsupported
            system_content = self._content(render, self._system_prefix, self._system_suffix, system_prompt)
            ids = self.encode(self._system_prefix, system_content, self._system_suffix)
            system_text = self._system_prefix + system_content + self._system_suffix
        else:
            system_text = self.processor.init_system_input("")
            ids = self.encode_markup(system_text)
        content = self._content(self.processor.append_user_input, self._user_prefix, self._user_suffix, delta)
        ids += self.encode(self._user_prefix, content, self._user_suffix)
        return ids, system_text + self._user_prefix + content + self._user_suffix

    def user_turn(self, delta: str, *, close_turn: bool) -> tuple[list[int], str]:
        """Ids and text of the environment chunk after a model turn.

        ``close_turn`` prepends the end-of-turn token (the model stopped without it).

        Example:
            >>> ids, text = encoder.user_turn("Higher.", close_turn=False)
            >>> text
            '\\n<|im_start|>user\\nHigher.<|im_end|>\\n<|im_start|>assistant\\n'
        """
        content = self._content(self.processor.append_user_input, self._user_prefix, self._user_suffix, delta)
        before = (self.turn_end if close_turn else "") + self.after_turn_end + self._user_prefix
        return self.encode(before, content, self._user_suffix), before + content + self._user_suffix

    def env_turn(
        self, delta: str, tool_results: Sequence[ToolResult] = (), *, close_turn: bool
    ) -> tuple[list[int], str]:
        """Ids and text of the environment chunk after a model turn: the tool results as ``tool`` messages
        rendered by the chat template (then ``delta``, if any, as a user message), or ``delta`` as a user turn.

        Example:
            >>> encoder.env_turn("", [ToolResult("add", "5")], close_turn=False)[1]
            '\\n<|im_start|>user\\n<tool_response>\\n5\\n</tool_response><|im_end|>\\n<|im_start|>assistant\\n'
        """
        if tool_results:
            return self.tool_turns.tool_chunk(tool_results, delta, close_turn=close_turn)
        return self.user_turn(delta, close_turn=close_turn)
