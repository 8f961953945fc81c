"""Hand-written processors for chat formats the automatic path cannot chunk.

The automatic :class:`~trl_env.chat.template_processor.ChatTemplateProcessor` refuses a
template whose generation prompt is not re-rendered in the conversation history (for
example Qwen3 with ``enable_thinking=False`` prefills an empty ``<think></think>`` block
that history turns never show, and DeepSeek-R1 prefills ``<think>\\n``). These presets fix
the chunks by hand: the sequence the model is trained on is exactly what it saw when it
sampled, turn after turn. Each is tested against the family's chat template from
``trl/chat_templates/``.

Example:
    >>> processor = preset("qwen3_nothink")
    >>> processor.append_user_input("Hi").endswith("<think>\\n\\n</think>\\n\\n")
    True
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from trl_env.chat.chunked_processor import ChunkedProcessor
from trl_env.chat.chunks import ChatChunks
from trl_env.chat.tool_formats import HERMES, QWEN3_5_XML
from trl_env.errors import ConfigError

THINK = ("<think>", "</think>")
GEMMA4_THOUGHT = ("<|channel>thought\n", "<channel|>")


def _chatml(generation_prompt: str) -> ChatChunks:
    return ChatChunks(
        bare_prefix="",
        system_prefix="<|im_start|>system\n",
        system_suffix="<|im_end|>\n",
        user_prefix="<|im_start|>user\n",
        user_suffix="<|im_end|>\n<|im_start|>assistant\n" + generation_prompt,
        turn_end="<|im_end|>",
        after_turn_end="\n",
    )


def qwen3_thinking_chunks() -> ChatChunks:
    """Qwen3 (and Qwen3.5/3.6 thinking): the model opens ``<think>`` itself... or the prompt does.

    Qwen3 leaves the thinking block to the model; Qwen3.5 thinking prefills ``<think>\\n``
    (see :func:`qwen3_5_thinking_chunks`).

    Example:
        >>> qwen3_thinking_chunks().user_suffix
        '<|im_end|>\\n<|im_start|>assistant\\n'
    """
    return _chatml("")


def qwen3_nothink_chunks() -> ChatChunks:
    """Qwen3 / Qwen3.5 with thinking off: an empty thinking block is prefilled.

    Example:
        >>> qwen3_nothink_chunks().user_suffix.endswith("<think>\\n\\n</think>\\n\\n")
        True
    """
    return _chatml("<think>\n\n</think>\n\n")


def qwen3_5_thinking_chunks() -> ChatChunks:
    """Qwen3.5 / 3.6 thinking: ``<think>\\n`` is prefilled and the model closes it; the template trims content.

    Example:
        >>> qwen3_5_thinking_chunks().user_suffix.endswith("<think>\\n")
        True
    """
    return dataclasses.replace(_chatml("<think>\n"), strips_content=True)


def qwen3_5_nothink_chunks() -> ChatChunks:
    """Qwen3.5 / 3.6 with thinking off: Qwen3's empty thinking block, and content trimmed as the template does.

    Example:
        >>> qwen3_5_nothink_chunks().user(" Hi ")
        '<|im_start|>user\\nHi<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n'
    """
    return dataclasses.replace(qwen3_nothink_chunks(), strips_content=True)


def gemma4_chunks(thinking: bool) -> ChatChunks:
    """Gemma 4: ``<|turn>`` / ``<turn|>`` turns; thinking is switched on by ``<|think|>`` in the system turn.

    Example:
        >>> gemma4_chunks(thinking=False).user("Hi")
        '<|turn>user\\nHi<turn|>\\n<|turn>model\\n'
    """
    think_flag = "<|think|>\n" if thinking else ""
    return ChatChunks(
        bare_prefix="<bos>" + (f"<|turn>system\n{think_flag}<turn|>\n" if thinking else ""),
        system_prefix=f"<bos><|turn>system\n{think_flag}",
        system_suffix="<turn|>\n",
        user_prefix="<|turn>user\n",
        user_suffix="<turn|>\n<|turn>model\n",
        turn_end="<turn|>",
        after_turn_end="\n",
        strips_content=True,
    )


def deepseek_r1_chunks() -> ChatChunks:
    """DeepSeek-R1 distills: ``<｜Assistant｜><think>\\n`` is prefilled; turns end with EOS.

    Example:
        >>> deepseek_r1_chunks().user("Hi")
        '<｜User｜>Hi<｜Assistant｜><think>\\n'
    """
    return ChatChunks(
        bare_prefix="<｜begin▁of▁sentence｜>",
        system_prefix="<｜begin▁of▁sentence｜>",
        system_suffix="",
        user_prefix="<｜User｜>",
        user_suffix="<｜Assistant｜><think>\n",
        turn_end="<｜end▁of▁sentence｜>",
        after_turn_end="",
    )


PRESETS: dict[str, Callable[[], ChunkedProcessor]] = {
    "qwen3_thinking": lambda: ChunkedProcessor(
        qwen3_thinking_chunks(),
        think_markers=THINK,
        name="qwen3_thinking",
        template_kwargs={"enable_thinking": True},
        tool_format=HERMES,
    ),
    "qwen3_nothink": lambda: ChunkedProcessor(
        qwen3_nothink_chunks(),
        think_markers=THINK,
        name="qwen3_nothink",
        template_kwargs={"enable_thinking": False},
        tool_format=HERMES,
    ),
    "qwen3_5_thinking": lambda: ChunkedProcessor(
        qwen3_5_thinking_chunks(), think_markers=THINK, name="qwen3_5_thinking", tool_format=QWEN3_5_XML
    ),
    "qwen3_5_nothink": lambda: ChunkedProcessor(
        qwen3_5_nothink_chunks(), think_markers=THINK, name="qwen3_5_nothink", tool_format=QWEN3_5_XML
    ),
    "gemma4_thinking": lambda: ChunkedProcessor(
        gemma4_chunks(True),
        think_markers=GEMMA4_THOUGHT,
        name="gemma4_thinking",
        template_kwargs={"enable_thinking": True},
    ),
    "gemma4": lambda: ChunkedProcessor(gemma4_chunks(False), think_markers=GEMMA4_THOUGHT, name="gemma4"),
    "deepseek_r1": lambda: ChunkedProcessor(deepseek_r1_chunks(), think_markers=THINK, name="deepseek_r1"),
}


def preset(name: str) -> ChunkedProcessor:
    """A preset processor by name (see ``PRESETS``).

    Example:
        >>> preset("deepseek_r1").parse_agent_output("plan</think>\\n\\n7")
        ('plan', '7')
    """
    try:
        return PRESETS[name]()
    except KeyError:
        raise ConfigError(f"unknown preset {name!r}; known presets: {', '.join(sorted(PRESETS))}") from None
