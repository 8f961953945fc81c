"""Agent programs of the agent tests, in a light module: the env pool's worker processes import it.

Each is an ordinary program a user could deploy: it gets a base URL and an API key, and uses a real agent library.
:func:`by_task` runs the behaviour its task names, so that one rollout holds every fault next to a healthy episode.
"""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

from openai import BadRequestError, OpenAI  # at the top: workers import it before any deadline starts

from examples.agent_calculator import TOOLS, solve
from trl_env.agents import AgentResult


def _client(endpoint: Any) -> Any:
    return OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)


def _ask(client: Any, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS, **kwargs)
    messages.append(reply.choices[0].message.model_dump(exclude_none=True))
    return reply


def _tool_results(messages: list[dict[str, Any]]) -> None:
    for call in messages[-1].get("tool_calls", []):
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": "42"})


def keeps_calling(endpoint: Any, task: str) -> AgentResult:
    """Calls the model until the endpoint refuses, then returns its reward and how many calls were refused."""
    client, messages = _client(endpoint), [{"role": "user", "content": task}]
    for turn in range(50):
        try:
            _ask(client, messages)
        except BadRequestError as error:
            assert "turn budget is spent" in str(error), error
            return AgentResult(0.5, {"answered_turns": float(turn)})
        _tool_results(messages)
    return AgentResult(0.0)


def rewrites_history(endpoint: Any, task: str) -> float:
    """After one answer, summarises the conversation instead of extending it."""
    client, messages = _client(endpoint), [{"role": "user", "content": task}]
    _ask(client, messages)
    _ask(client, [{"role": "user", "content": "Summary: you multiplied. " + task}])
    return 1.0


_EPISODES = itertools.count()


def summarises(endpoint: Any, task: str) -> float:
    """Two tool turns, then replaces its history by a summary (a new system message and one user message), then
    two more tool turns on the summarised conversation: a rewrite mid-episode, as context-compacting agents do.
    Its reward alternates 0, 1 between the episodes a process runs, so a GRPO group of them has advantages."""
    client, messages = _client(endpoint), [{"role": "user", "content": task}]
    for _ in range(2):
        _ask(client, messages)
        _tool_results(messages)
    summary = f"Summary so far: multiply(6, 7) returned 42 twice. Task: {task}"
    messages = [{"role": "system", "content": "You resume a summarised task."}, {"role": "user", "content": summary}]
    for _ in range(2):
        _ask(client, messages)
        _tool_results(messages)
    return float(next(_EPISODES) % 2)


def raises(endpoint: Any, task: str) -> float:
    _ask(_client(endpoint), [{"role": "user", "content": task}])
    raise ValueError("the agent's own bug")


def never_calls(endpoint: Any, task: str) -> float:
    return 1.0


def hangs(endpoint: Any, task: str) -> float:
    messages = [{"role": "user", "content": task}]
    _ask(_client(endpoint), messages)
    time.sleep(3600)  # the pool's env_timeout kills the worker
    return 1.0


def malformed(endpoint: Any, task: str) -> float:
    """Sends n=2 (refused, 400 naming the field); the SDK raises and the agent does not catch it."""
    _ask(_client(endpoint), [{"role": "user", "content": task}], n=2)
    return 1.0


def streams(endpoint: Any, task: str) -> float:
    _ask(_client(endpoint), [{"role": "user", "content": task}], stream=True)
    return 1.0


BEHAVIOURS = {
    "ok": lambda endpoint, task: solve(endpoint, "What is 6 * 7 + 1?"),
    "keeps_calling": keeps_calling,
    "rewrites": rewrites_history,
    "raises": raises,
    "never_calls": never_calls,
    "hangs": hangs,
    "malformed": malformed,
    "streams": streams,
}


def by_task(endpoint: Any, task: str) -> Any:
    """Run the behaviour named by the task."""
    return BEHAVIOURS[task](endpoint, task)


RECORDED: dict[str, list[dict[str, Any]]] = {}  # task -> the agent's last conversation (thread isolation only)


def recording(endpoint: Any, task: str) -> float:
    """The calculator loop with a system message, recording its conversation (to compare with the episode)."""
    client = _client(endpoint)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful calculator."},
        {"role": "user", "content": task},
    ]
    for _ in range(3):
        _ask(client, messages)
        RECORDED[task] = json.loads(json.dumps(messages))
        _tool_results(messages)
    return 0.25
