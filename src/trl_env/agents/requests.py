"""OpenAI chat-completions requests in, responses out: what the agent endpoint accepts, refuses and answers.

A request is read into a :class:`ChatRequest` or refused with a :class:`RequestError` naming the field, which the
server sends back as an HTTP 400 in OpenAI's error shape (the SDKs raise ``BadRequestError`` and do not retry).

Honoured: ``messages`` (``system``, ``user``, ``assistant``, ``tool``; text content or lists of text parts),
``tools`` (``function`` tools), ``model`` (any name). Accepted, not enforced (the rollout's settings rule the
sampling, so that the trained logprobs are the policy's): ``temperature``, ``top_p``, ``max_tokens``,
``max_completion_tokens`` (the rollout's ``max_turn_tokens`` bounds a turn), ``tool_choice`` ``"auto"``,
``"none"`` and ``"required"``, ``parallel_tool_calls``, and ``stop`` (the end-of-turn token ends a turn; an answer
is never cut at a stop sequence, since the agent must see what is trained: ``agent_env`` counts the answers that
hold one in its ``agent_stop_sequences_sampled`` metric). Refused: ``n`` > 1, ``stream``, a named ``tool_choice``,
``logprobs``, a non-text ``response_format``, and any other role or content part.

Example:
    >>> request = read_request({"model": "m", "messages": [{"role": "user", "content": "Hi"}]})
    >>> request.messages
    ({'role': 'user', 'content': 'Hi'},)
    >>> read_request({"messages": [{"role": "user", "content": "Hi"}], "n": 2})
    Traceback (most recent call last):
    ...
    trl_env.agents.requests.RequestError: n: only n=1 is supported (one sampled answer per model turn), got 2
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from trl_env.chat.tool_calls import ToolCall
from trl_env.errors import DataError

ROLES = ("system", "user", "assistant", "tool")


class RequestError(DataError):
    """A chat request the endpoint refuses; ``field`` is the request field at fault (OpenAI's ``param``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


@dataclass(frozen=True)
class ChatRequest:
    """A valid chat request, its messages made plain (text content, tool calls with parsed arguments).

    Attributes:
        model: the model name the agent asked for (any name is served).
        messages: ``{"role", "content"}`` dicts; an assistant's ``tool_calls`` as ``[{"name", "arguments"}]``
            with ``arguments`` a dict; a tool message's ``name`` and ``tool_call_id`` when given.
        tools: the request's tools as JSON schemas (``{"type": "function", "function": {...}}``).
        stop: the request's stop sequences (accepted, not applied).
        raw_messages: the messages as sent (parsed JSON), so that the next request can reuse what it resends.
    """

    model: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...]
    stop: tuple[str, ...] = ()
    raw_messages: tuple[Any, ...] = field(default=(), repr=False, compare=False)


def _text(content: Any, field: str) -> str:
    """Message content as text: a string, None (empty) or a list of ``{"type": "text", "text": ...}`` parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for index, part in enumerate(content):
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise RequestError(f"{field}[{index}]", f"only text parts are supported, got {str(part)[:80]}")
            parts.append(part["text"])
        return "".join(parts)
    raise RequestError(field, f"expected a string or a list of text parts, got {type(content).__name__}")


def _arguments(raw: Any, field: str) -> dict[str, Any]:
    """A tool call's arguments as a dict: OpenAI sends them as a JSON string."""
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except json.JSONDecodeError as error:
        raise RequestError(field, f"arguments are not JSON: {error}") from None
    if not isinstance(value, dict):
        raise RequestError(field, f"arguments must be a JSON object, got {type(value).__name__}")
    return value


def _message(raw: Any, index: int) -> dict[str, Any]:
    field = f"messages[{index}]"
    if not isinstance(raw, dict):
        raise RequestError(field, f"expected an object, got {type(raw).__name__}")
    role = raw.get("role")
    if role not in ROLES:
        raise RequestError(f"{field}.role", f"expected one of {ROLES}, got {role!r}")
    message: dict[str, Any] = {"role": role, "content": _text(raw.get("content"), f"{field}.content")}
    if role == "assistant" and raw.get("tool_calls"):
        calls = raw["tool_calls"]
        if not isinstance(calls, list):
            raise RequestError(f"{field}.tool_calls", f"expected a list, got {type(calls).__name__}")
        message["tool_calls"] = []
        for number, call in enumerate(calls):
            where = f"{field}.tool_calls[{number}]"
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                raise RequestError(where, "expected {'type': 'function', 'function': {'name': ..., 'arguments': ...}}")
            arguments = _arguments(function.get("arguments"), f"{where}.function.arguments")
            message["tool_calls"].append({"name": function["name"], "arguments": arguments, "id": call.get("id")})
    if role == "tool":
        for key in ("name", "tool_call_id"):
            if isinstance(raw.get(key), str):
                message[key] = raw[key]
    return message


def _tools(raw: Any) -> tuple[dict[str, Any], ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise RequestError("tools", f"expected a list, got {type(raw).__name__}")
    for index, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not (isinstance(tool, dict) and tool.get("type") == "function" and isinstance(function, dict)):
            raise RequestError(f"tools[{index}]", "expected {'type': 'function', 'function': {...}}")
        if not isinstance(function.get("name"), str):
            raise RequestError(f"tools[{index}].function.name", "expected a string")
    return tuple(json.loads(json.dumps(raw)))  # plain JSON values, picklable


def _refuse_unsupported(body: dict[str, Any]) -> None:
    """Refuse the settings the endpoint cannot honour, each naming its field."""
    if body.get("n", 1) != 1:
        raise RequestError("n", f"only n=1 is supported (one sampled answer per model turn), got {body['n']!r}")
    if body.get("stream"):
        raise RequestError("stream", "streaming is not supported: send stream=false (the default)")
    if body.get("logprobs") or body.get("top_logprobs"):
        raise RequestError("logprobs", "logprobs are not served: trl-env keeps the sampled logprobs for training")
    choice = body.get("tool_choice")
    if choice is not None and choice not in ("auto", "none", "required"):
        raise RequestError("tool_choice", f"only 'auto', 'none' and 'required' are accepted, got {choice!r}")
    response_format = body.get("response_format")
    if response_format is not None and response_format != {"type": "text"}:
        raise RequestError("response_format", f"only {{'type': 'text'}} is supported, got {response_format!r}")


def read_request(body: Any, previous: ChatRequest | None = None) -> ChatRequest:
    """Validate a chat-completions request body (parsed JSON).

    An agent resends its whole conversation at every request: when the request's first messages are, as sent,
    exactly ``previous``'s, their plain forms are ``previous``'s own message objects (not read again), which is
    also how :func:`~trl_env.agents.history.added_messages` knows them unchanged without comparing them.

    Args:
        body: the request's JSON body.
        previous: the episode's previous request, whose messages this one may resend.

    Returns:
        The request, its messages made plain.

    Raises:
        RequestError: naming the first field at fault.

    Example:
        >>> call = {"type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        >>> body = {"messages": [{"role": "user", "content": "Add."}, {"role": "assistant", "tool_calls": [call]}]}
        >>> read_request(body).messages[1]["tool_calls"]
        [{'name': 'add', 'arguments': {'a': 1}, 'id': None}]
        >>> read_request({"messages": [{"role": "narrator", "content": "x"}]})
        Traceback (most recent call last):
        ...
        trl_env.agents.requests.RequestError: messages[0].role: expected one of ('system', 'user', 'assistant', \
'tool'), got 'narrator'
    """
    if not isinstance(body, dict):
        raise RequestError("body", f"expected a JSON object, got {type(body).__name__}")
    _refuse_unsupported(body)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("messages", "expected a non-empty list of messages")
    stop = body.get("stop") or ()
    stop = (stop,) if isinstance(stop, str) else stop
    if not (isinstance(stop, list | tuple) and all(isinstance(s, str) for s in stop)):
        raise RequestError("stop", f"expected a string or a list of strings, got {stop!r:.80}")
    known = len(previous.raw_messages) if previous is not None else 0
    if not (0 < known <= len(messages) and previous is not None and messages[:known] == list(previous.raw_messages)):
        known = 0  # one C-level comparison of the parsed JSON: equal as sent means equal once read
    reused = previous.messages[:known] if known else ()
    messages_read = reused + tuple(_message(m, i) for i, m in enumerate(messages[known:], start=known))
    tools = _tools(body.get("tools"))
    return ChatRequest(str(body.get("model", "")), messages_read, tools, tuple(stop), tuple(messages))


def response_body(model: str, text: str, calls: list[ToolCall], number: int) -> dict[str, Any]:
    """The chat-completions response for the model's answer: its text and its tool calls.

    Args:
        model: the model name the request asked for (echoed, as servers do).
        text: the answer's text (the reasoning is not sent back).
        calls: the answer's tool calls; a malformed one keeps its name (``"unknown"`` when it had none) and is
            sent with ``{}`` arguments (the engine counts the turn as a parse failure).
        number: the answer's number in the episode (makes ids unique).

    Returns:
        The JSON body, with ``usage`` zero: token counts are the engine's business, in the episode.

    Example:
        >>> body = response_body("m", "", [ToolCall("add", {"a": 1})], 0)
        >>> body["choices"][0]["finish_reason"], body["choices"][0]["message"]["tool_calls"][0]["function"]
        ('tool_calls', {'name': 'add', 'arguments': '{"a": 1}'})
    """
    tool_calls = []
    for index, call in enumerate(calls):
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
        tool_calls.append({"id": f"call_{number}_{index}", "type": "function", "function": function})
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
        ],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def error_body(message: str, field: str | None = None, kind: str = "invalid_request_error") -> dict[str, Any]:
    """OpenAI's error shape: ``{"error": {"message", "type", "param", "code"}}``.

    Example:
        >>> error_body("n: only n=1", "n")["error"]["param"]
        'n'
    """
    return {"error": {"message": message, "type": kind, "param": field, "code": None}}
