"""The history check: each agent request must extend the conversation the episode has trained on.

The episode's tokens are the first request rendered by the chat template, then per model turn the *sampled* ids
and the env chunk of the messages the next request added. That is the agent's conversation only while each
request's messages are the previous request's, then the assistant answer the agent was given, then new messages
(tool results, then at most one user message). :func:`added_messages` checks it and returns what is new;
an agent that rewrote its history (summarised, dropped or edited a message) gets a :class:`HistoryError` that shows
the first differing message and where in it they differ.

Example:
    >>> conversation = [{"role": "user", "content": "Add 1 and 2."}, {"role": "assistant", "content": "3"}]
    >>> added_messages(conversation, [*conversation, {"role": "user", "content": "Sure?"}])
    [{'role': 'user', 'content': 'Sure?'}]
    >>> added_messages(conversation, [conversation[0], {"role": "assistant", "content": "three"}])
    Traceback (most recent call last):
    ...
    trl_env.agents.history.HistoryError: the agent's request does not extend its conversation: message 1 differs \
at character 34: expected {"role": "assistant", "content": "3"}, got {"role": "assistant", "content": "three"}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trl_env.core import ToolResult
from trl_env.errors import TrlEnvError

HISTORY_POLICIES = ("fail", "split")


class HistoryError(TrlEnvError, ValueError):
    """An agent request that cannot continue its episode: it rewrote the history, or its new messages cannot be
    rendered as one env turn (an assistant message the model did not write, two user messages, ...)."""


def comparable(message: dict[str, Any]) -> dict[str, Any]:
    """A message without what an agent may change freely: tool-call ids (the endpoint made them up).

    Example:
        >>> comparable({"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {}, "id": "1"}]})
        {'role': 'assistant', 'content': '', 'tool_calls': [{'name': 'f', 'arguments': {}}]}
    """
    plain = {key: value for key, value in message.items() if key not in ("tool_calls", "tool_call_id")}
    if message.get("tool_calls"):
        plain["tool_calls"] = [{"name": c["name"], "arguments": c["arguments"]} for c in message["tool_calls"]]
    return plain


def _difference(index: int, expected: dict[str, Any], got: dict[str, Any] | None) -> str:
    if got is None:
        return f"message {index} is missing: expected {_short(expected)}"
    want, have = json.dumps(expected, ensure_ascii=False), json.dumps(got, ensure_ascii=False)
    at = next((i for i, (a, b) in enumerate(zip(want, have, strict=False)) if a != b), min(len(want), len(have)))
    return f"message {index} differs at character {at}: expected {_short(expected)}, got {_short(got)}"


def _short(message: dict[str, Any], limit: int = 300) -> str:
    text = json.dumps(message, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def added_messages(conversation: Sequence[dict[str, Any]], messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages a request adds to ``conversation`` (the previous request's, then the answer given).

    Args:
        conversation: the episode's conversation so far, as :func:`comparable` messages or as sent.
        messages: the new request's messages (:class:`~trl_env.agents.requests.ChatRequest` form).

    Returns:
        The messages after the conversation, as sent (at least one).

    Raises:
        HistoryError: a message of the conversation is missing or differs (the first one is shown), or the
            request adds nothing.
    """
    for index, expected in enumerate(conversation):
        if index < len(messages) and messages[index] is expected:
            continue  # the previous request's own message, resent unchanged (read_request reused it)
        got = comparable(messages[index]) if index < len(messages) else None
        if got != comparable(expected):
            raise HistoryError(
                "the agent's request does not extend its conversation: " + _difference(index, comparable(expected), got)
            )
    added = list(messages[len(conversation) :])
    if not added:
        raise HistoryError("the agent's request adds no message after the answer it was given")
    return added


def template_messages(messages: Sequence[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """A request's messages in the chat-template form a rewritten history is rendered in (``split``).

    Tool calls take the ``{"type": "function", "function": {"name", "arguments"}}`` form every template reads;
    a tool message keeps its ``name`` and ``tool_call_id`` where the agent gave them.

    Example:
        >>> template_messages([{"role": "assistant", "content": "", "tool_calls": [{"name": "f", "arguments": {}}]}])
        ({'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'f', \
'arguments': {}}}]},)
    """
    out = []
    for message in messages:
        plain = {key: message[key] for key in ("role", "content", "name", "tool_call_id") if key in message}
        if message.get("tool_calls"):
            plain["tool_calls"] = [
                {"type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in message["tool_calls"]
            ]
        out.append(plain)
    return tuple(out)


def first_turn(messages: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """The episode's prompt from the agent's first request: an optional system message, then one user message.

    Returns:
        ``(system_prompt, user_text)``; the system prompt is ``""`` without a system message.

    Example:
        >>> first_turn([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}])
        ('Be brief.', 'Hi')
    """
    roles = [m["role"] for m in messages]
    if roles == ["user"]:
        return "", messages[0]["content"]
    if roles == ["system", "user"]:
        return messages[0]["content"], messages[1]["content"]
    raise HistoryError(
        f"the agent's first request must be [system,] user (the episode's prompt); got the roles {roles}"
    )


def env_turn(added: Sequence[dict[str, Any]], answer: dict[str, Any]) -> tuple[tuple[ToolResult, ...], str]:
    """The env turn of the messages a request added: tool results, then the user text (``""`` if none).

    Args:
        added: the new messages (:func:`added_messages`).
        answer: the assistant message the agent was given (its tool calls name the results without a name).

    Returns:
        ``(tool_results, delta)`` as a tool env's ``step`` gives them.

    Raises:
        HistoryError: the messages are not ``tool* [user]``.

    Example:
        >>> answer = {"role": "assistant", "content": "", "tool_calls": [{"name": "add", "arguments": {}, "id": "c0"}]}
        >>> env_turn([{"role": "tool", "content": "3", "tool_call_id": "c0"}], answer)
        ((ToolResult(name='add', content='3'),), '')
    """
    roles = [m["role"] for m in added]
    tools = roles[: len(roles) - 1] if roles[-1] == "user" else roles
    if any(role != "tool" for role in tools):
        raise HistoryError(
            f"the agent's new messages must be tool results then at most one user message, got the roles {roles}"
        )
    names_by_id = {c.get("id"): c["name"] for c in answer.get("tool_calls", ())}
    results = tuple(
        ToolResult(m.get("name") or names_by_id.get(m.get("tool_call_id"), ""), m["content"])
        for m in added
        if m["role"] == "tool"
    )
    return results, added[-1]["content"] if roles[-1] == "user" else ""
