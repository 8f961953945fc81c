"""Per-turn prompts rendered by the chat template itself (``history="template"`` and ``"window"``).

Under ``history="full"`` an episode is one growing token sequence: the model sees everything it sampled
before, tokens verbatim. Templates that rewrite history (Qwen3 and Qwen3.5 drop earlier ``<think>`` blocks,
DeepSeek-R1 distills strip them) show a deployed model another context. Here every model turn gets its own
prompt: ``tokenizer.apply_chat_template(messages so far, add_generation_prompt=True, tools=...)`` of the real
template, tokenized as the template's caller would (``tokenize=True``), and the turn's sampled ids are kept
verbatim as that sample's completion.

The conversation is kept as chat messages (:attr:`~trl_env.episode.Episode.messages`): the system prompt (if
any), the first observation as a user message, then per model turn its assistant message (the text the model
wrote, without the end-of-turn token: the template drops old thinking as it does in deployment) and the env's
answer (tool results as ``tool`` messages, then the delta, if any, as a user message; else the delta as a user
message). ``history="window"`` with ``history_window=k`` keeps the opening (system prompt, first observation)
and the last ``k`` turns, each with the env's answer to it.

Example:
    >>> history = TemplateHistory(tokenizer, window=None)
    >>> messages = [{"role": "user", "content": "Guess."}]
    >>> ids = history.prompt_ids(messages, history.indices(messages, 1), tools=[])
    >>> tokenizer.decode(ids)
    '<|im_start|>user\\nGuess.<|im_end|>\\n<|im_start|>assistant\\n'
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from trl_env.core import ToolResult
from trl_env.errors import TemplateError

if TYPE_CHECKING:  # types only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase

    from trl_env.episode import Episode

PROBE = "PROBEQXZ"


class TemplateHistory:
    """Renders per-turn prompts of one episode's messages with the tokenizer's chat template.

    Args:
        tokenizer: its ``chat_template`` renders every prompt.
        window: the number of earlier turns a prompt keeps after the opening; None keeps them all.
        template_kwargs: extra chat-template arguments (e.g. ``enable_thinking``), the processor's.
        answer_prefix: text that opens every model turn (the processor's, from
            :func:`~trl_env.chat.chunked_processor.with_answer_prefix`): each prompt ends with it, tokenized alone
            after the template's generation prompt as under ``full``, and each assistant message starts with it.
    """

    def __init__(
        self,
        tokenizer: PreTrainedTokenizerBase,
        *,
        window: int | None,
        template_kwargs: dict[str, Any] | None = None,
        answer_prefix: str = "",
    ) -> None:
        if not tokenizer.chat_template:
            raise TemplateError(
                "history='template'/'window' renders prompts with the tokenizer's chat template; it has none"
            )
        self.tokenizer = tokenizer
        self.window = window
        self.template_kwargs = dict(template_kwargs or {})
        self.answer_prefix = answer_prefix
        self.prefix_ids = list(tokenizer.encode(answer_prefix, add_special_tokens=False)) if answer_prefix else []
        self.encoded_tokens = 0  # prompt tokens rendered and tokenized so far (the cost of re-rendering)
        # multimodal templates (SmolVLM, Idefics3) render only content given as a list of typed parts
        probe = tokenizer.apply_chat_template(
            [{"role": "user", "content": PROBE}], tokenize=False, **self.template_kwargs
        )
        self.parts_content = PROBE not in probe

    def template_messages(self, messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``messages`` as the template reads them: text content as a list of one text part where it must be.

        Example:
            >>> TemplateHistory(tokenizer, window=None).template_messages([{"role": "user", "content": "Hi"}])
            [{'role': 'user', 'content': 'Hi'}]
        """
        if not self.parts_content:
            return list(messages)
        return [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in messages]

    @staticmethod
    def opening(system_prompt: str, delta: str) -> list[dict[str, Any]]:
        """The messages before the first model turn.

        Example:
            >>> TemplateHistory.opening("Be brief.", "Hi")
            [{'role': 'system', 'content': 'Be brief.'}, {'role': 'user', 'content': 'Hi'}]
        """
        system = [{"role": "system", "content": system_prompt}] if system_prompt else []
        return [*system, {"role": "user", "content": delta}]

    @staticmethod
    def answer(delta: str, tool_results: Sequence[ToolResult]) -> list[dict[str, Any]]:
        """The messages of the env's answer to a model turn: its tool results, then its delta (if any).

        Example:
            >>> TemplateHistory.answer("Go on.", [ToolResult("add", "5")])
            [{'role': 'tool', 'name': 'add', 'content': '5'}, {'role': 'user', 'content': 'Go on.'}]
        """
        messages: list[dict[str, Any]] = [{"role": "tool", "name": r.name, "content": r.content} for r in tool_results]
        if delta or not tool_results:
            messages.append({"role": "user", "content": delta})
        return messages

    def indices(self, messages: Sequence[dict[str, Any]], opening: int) -> list[int]:
        """The positions of the messages the next prompt renders: all, or the opening and the last turns.

        A turn starts at an assistant message and runs to the next one, so a window never splits a turn from
        the env's answer to it.

        Args:
            messages: the conversation so far.
            opening: how many messages form the opening (system prompt, first observation).

        Example:
            >>> msgs = [{"role": r} for r in ("user", "assistant", "user", "assistant", "user")]
            >>> TemplateHistory(tokenizer, window=1).indices(msgs, 1)
            [0, 3, 4]
        """
        everything = list(range(len(messages)))
        if self.window is None:
            return everything
        starts = [i for i in range(opening, len(messages)) if messages[i]["role"] == "assistant"]
        if len(starts) <= self.window:
            return everything
        return [*range(opening), *range(starts[-self.window], len(messages))]

    def render(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict], *, generation: bool) -> str:
        """The template's text of ``messages`` (as :meth:`prompt_ids` tokenizes it)."""
        return self.tokenizer.apply_chat_template(
            self.template_messages(messages), tools=list(tools) or None, tokenize=False,
            add_generation_prompt=generation, **self.template_kwargs,
        )  # fmt: skip

    def prompt_ids(
        self, messages: Sequence[dict[str, Any]], indices: Sequence[int], tools: Sequence[dict]
    ) -> list[int]:
        """``apply_chat_template`` of the chosen messages with the generation prompt, tokenized by the template.

        Returns:
            The prompt's token ids, exactly the template's (``tokenize=True``), then the answer prefix's.
        """
        chosen = self.template_messages([messages[i] for i in indices])
        ids = self.tokenizer.apply_chat_template(
            chosen, tools=list(tools) or None, tokenize=True, add_generation_prompt=True, return_dict=False,
            **self.template_kwargs,
        )  # fmt: skip
        ids = [int(i) for i in ids] + self.prefix_ids
        self.encoded_tokens += len(ids)
        return ids

    def transcript(self, episode: Episode) -> str:
        """The episode's conversation as the template renders it; after each history rewrite (an env that rewrote
        its conversation, see :class:`~trl_env.core.RewritesHistory`) a line saying why, then the new conversation.
        """
        starts = [0, *(r["start"] for r in episode.history_rewrites), len(episode.messages)]
        tools = [episode.tools, *(tools_in_effect(episode, upto=i + 1) for i in range(len(episode.history_rewrites)))]
        parts = [
            self.render(episode.messages[a:b], part_tools, generation=False)
            for (a, b), part_tools in zip(pairwise(starts), tools, strict=True)
        ]
        notes = [f"\n[history rewritten before turn {r['turn']}: {r['reason']}]\n" for r in episode.history_rewrites]
        return parts[0] + "".join(note + part for note, part in zip(notes, parts[1:], strict=True))


def tools_in_effect(episode: Episode, upto: int | None = None) -> list[dict[str, Any]]:
    """The tools the episode's prompts declare after its first ``upto`` history rewrites (all of them by default):
    the opening's ``Episode.tools``, or those of the last rewrite that changed them.

    Example:
        >>> from trl_env.episode import Episode
        >>> episode = Episode(seed="0", prompt_ids=[], prompt_text="")
        >>> episode.tools = [{"name": "a"}]
        >>> episode.history_rewrites = [{"turn": 2, "start": 5, "reason": "r", "tools": [{"name": "b"}]}]
        >>> tools_in_effect(episode), tools_in_effect(episode, upto=0)
        ([{'name': 'b'}], [{'name': 'a'}])
    """
    rewrites = episode.history_rewrites if upto is None else episode.history_rewrites[:upto]
    return next((r["tools"] for r in reversed(rewrites) if "tools" in r), episode.tools)
