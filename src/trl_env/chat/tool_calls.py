"""Tool calls between the model and a tool env: the normalised action lines, and tool schemas.

Whatever the chat family writes (Qwen's ``<tool_call>`` JSON, Qwen3.5's ``<function=...>`` XML,
Llama's bare ``{"name": ..., "parameters": ...}``), the env's ``step`` receives the turn's calls in
one normalised form, one line per call after the answer's text::

    <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>

A call the parser could not read (broken JSON, no name) is passed on as an error line, so the env
can answer it with the template's tool error (the turn also counts as a parse failure)::

    <tool_call>{"name": "unknown", "error": "malformed tool call: ..."}</tool_call>

Example:
    >>> action = format_calls([ToolCall("add", {"a": 1, "b": 2}), ToolCall("unknown", error="bad JSON")])
    >>> text, calls = parse_tool_calls("I will add.\\n" + action)
    >>> text, calls[0].name, calls[0].arguments, calls[1].error
    ('I will add.', 'add', {'a': 1, 'b': 2}, 'bad JSON')
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trl_env.errors import ConfigTypeError

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_LINE = re.compile(r"<tool_call>(\{.*?\})</tool_call>", re.DOTALL)


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a model turn; ``error`` is set (and ``name`` may be ``"unknown"``) when it was malformed."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def format_calls(calls: Sequence[ToolCall]) -> str:
    """The normalised action lines of ``calls``, one per line.

    Example:
        >>> format_calls([ToolCall("f", {"x": 1})])
        '<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>'
    """
    lines = []
    for call in calls:
        payload: dict[str, Any] = {"name": call.name}
        payload.update({"error": call.error} if call.error is not None else {"arguments": call.arguments})
        lines.append(OPEN + json.dumps(payload, ensure_ascii=False) + CLOSE)
    return "\n".join(lines)


def parse_tool_calls(action: str) -> tuple[str, list[ToolCall]]:
    """Split an action into its text and its normalised tool calls (the inverse of :func:`format_calls`).

    Example:
        >>> parse_tool_calls('<tool_call>{"name": "f", "arguments": {}}</tool_call>')
        ('', [ToolCall(name='f', arguments={}, error=None)])
        >>> parse_tool_calls("just text")
        ('just text', [])
    """
    calls = []
    for match in _LINE.finditer(action):
        try:
            payload = json.loads(match.group(1))
        except json.JSONDecodeError as error:  # not written by format_calls: report it, do not raise
            calls.append(ToolCall("unknown", error=f"malformed tool call: {error}"))
            continue
        name = str(payload.get("name") or "unknown")
        if "error" in payload:
            calls.append(ToolCall(name, error=str(payload["error"])))
        else:
            arguments = payload.get("arguments")
            calls.append(ToolCall(name, arguments if isinstance(arguments, dict) else {}))
    return _LINE.sub("", action).strip(), calls


def tool_schema(tool: Callable[..., Any] | Mapping[str, Any]) -> dict[str, Any]:
    """The JSON schema ``apply_chat_template(tools=[tool])`` renders for ``tool``.

    A function (or bound method) is read from its type hints and Google-style docstring, as
    transformers does; a mapping is taken as a schema already.

    Example:
        >>> def add(a: int, b: int) -> int:
        ...     '''Add two integers.
        ...
        ...     Args:
        ...         a: the first.
        ...         b: the second.
        ...     '''
        ...     return a + b
        >>> tool_schema(add)["function"]["parameters"]["properties"]["a"]
        {'type': 'integer', 'description': 'the first.'}
    """
    if isinstance(tool, Mapping):
        return json.loads(json.dumps(tool))  # plain, picklable JSON values; fails early on non-JSON content
    if not callable(tool):
        raise ConfigTypeError(f"a tool must be a function or a JSON schema (dict), got {type(tool).__name__}")
    from transformers.utils import get_json_schema

    return get_json_schema(tool)


def coerce_arguments(arguments: dict[str, Any], schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """Type string arguments by the tool's schema, as ``parse_response(tools=...)`` does.

    Formats that write arguments as raw text (Qwen3.5's ``<parameter=a>\\n7\\n</parameter>``) cannot
    tell ``"7"`` from ``7``; the tool's schema can. A string given for a non-string parameter is
    read as JSON when it parses, and kept as it is otherwise.

    Example:
        >>> schema = {"function": {"parameters": {"properties": {"a": {"type": "integer"}, "s": {"type": "string"}}}}}
        >>> coerce_arguments({"a": "7", "s": "7"}, schema)
        {'a': 7, 's': '7'}
    """
    if not schema:
        return arguments
    properties = schema.get("function", schema).get("parameters", {}).get("properties", {})
    typed = {}
    for key, value in arguments.items():
        kind = properties.get(key, {}).get("type", "string")
        if isinstance(value, str) and kind != "string":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                pass
        typed[key] = value
    return typed
