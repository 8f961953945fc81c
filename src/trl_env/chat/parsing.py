"""Turning a model's answer into ``(reasoning, action)``.

Two strategies, both total (they never raise on model output):

* :func:`parse_with_response_template` uses transformers' ``tokenizer.parse_response``;
* :func:`split_on_markers` splits on a family's thinking markers.

Tool calls found by the response parser are kept in the action as normalised blocks,
one per call: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.

Example:
    >>> split_on_markers("<think>plan</think>\\n\\n42", "<think>", "</think>")
    ParsedOutput(reasoning='plan', action='42', ok=True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trl_env.chat.tool_calls import ToolCall, format_calls
from trl_env.core import ParsedOutput, Processor, StrictParser

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


def split_on_markers(completion: str, think_open: str, think_close: str, *, opened: bool = False) -> ParsedOutput:
    """Split ``completion`` into the thinking block and what follows it.

    ``opened`` says the generation prompt already opened the thinking block (so the
    completion starts inside it). An unclosed block is a parse failure: all of it is
    reasoning and the action is empty.

    Example:
        >>> split_on_markers("hmm</think>7", "<think>", "</think>", opened=True)
        ParsedOutput(reasoning='hmm', action='7', ok=True)
        >>> split_on_markers("no markers", "<think>", "</think>")
        ParsedOutput(reasoning='', action='no markers', ok=True)
    """
    text = completion
    if not opened:
        stripped = text.lstrip()
        if not stripped.startswith(think_open):
            return ParsedOutput("", text.strip(), think_close not in text)
        text = stripped[len(think_open) :]
    if think_close not in text:
        return ParsedOutput(text.strip(), "", False)
    reasoning, action = text.split(think_close, 1)
    return ParsedOutput(reasoning.strip(), action.strip(), True)


def format_tool_calls(tool_calls: list[dict[str, Any]]) -> str:
    """Render parsed tool calls as normalised ``<tool_call>`` JSON blocks, one per line.

    Example:
        >>> format_tool_calls([{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}])
        '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
    """
    return format_calls(calls_of(tool_calls))


def calls_of(tool_calls: list[dict[str, Any]]) -> list[ToolCall]:
    """``parse_response``'s tool calls as :class:`~trl_env.chat.tool_calls.ToolCall`; an unreadable one has an error.

    Example:
        >>> calls_of([{"function": {"name": "f", "arguments": {"x": 1}}}, {"function": {"arguments": {}}}])[1].error
        "malformed tool call: no function name in {'function': {'arguments': {}}}"
    """
    calls = []
    for call in tool_calls:
        function = call.get("function", call)
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str):
            calls.append(ToolCall("unknown", error=f"malformed tool call: no function name in {call!r:.80}"))
        elif arguments is not None and not isinstance(arguments, dict):
            calls.append(ToolCall(name, error=f"malformed tool call: arguments are not an object: {arguments!r:.80}"))
        else:
            calls.append(ToolCall(name, arguments or {}))
    return calls


def parse_with_response_template(
    tokenizer: PreTrainedTokenizerBase, completion: str, prefix: str, turn_end: str
) -> ParsedOutput | None:
    """Parse with ``tokenizer.parse_response``; ``None`` when the parser cannot handle the text.

    ``prefix`` is the generation prompt the completion followed; ``turn_end`` is appended
    so that templates whose content field closes on it see a complete turn.

    Example:
        >>> from trl.chat_template_utils import add_response_schema
        >>> parse_with_response_template(add_response_schema(tokenizer), "<think>a</think>b",
        ...                              "<|im_start|>assistant\\n", "<|im_end|>")
        ParsedOutput(reasoning='a', action='b', ok=True)
    """
    try:
        message = tokenizer.parse_response(completion + turn_end, prefix=prefix)
    except Exception:
        return None
    if not isinstance(message, dict):
        return None
    reasoning = message.get("reasoning_content") or message.get("thinking") or ""
    action = (message.get("content") or "").strip()
    calls = calls_of(message.get("tool_calls") or [])
    if calls:
        action = "\n".join(part for part in (action, format_calls(calls)) if part)
    return ParsedOutput(str(reasoning).strip(), action, all(call.error is None for call in calls))


def parse_turn(processor: Processor, completion: str) -> ParsedOutput:
    """Parse one model turn: the processor's own :meth:`~trl_env.core.StrictParser.parse` when it has one;
    otherwise ``parse_agent_output``, with an empty action counted as a parse failure.

    Example:
        >>> class Plain:
        ...     def parse_agent_output(self, completion):
        ...         return "", completion.strip()
        >>> parse_turn(Plain(), "  "), parse_turn(Plain(), "7")
        (ParsedOutput(reasoning='', action='', ok=False), ParsedOutput(reasoning='', action='7', ok=True))
    """
    if isinstance(processor, StrictParser):
        return processor.parse(completion)
    reasoning, action = processor.parse_agent_output(completion)
    return ParsedOutput(reasoning, action, bool(action.strip()))
