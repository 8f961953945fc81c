"""``solve``: a plain ``openai``-SDK tool loop answering ``What is A * B + C?``, and its reward.

Nothing in it knows about trl-env: it is the agent as one would deploy it, given a base URL. trl-env trains it
with :func:`trl_env.agents.agent_env`: each ``chat.completions.create`` call is one model turn of the episode::

    make_rollout_func(agent_env("examples.agent_calculator:solve", max_turns=4), max_turns=4)
    trl-env check-env trl_env.agents:agent_env --env-kwargs '{"agent": "examples.agent_calculator:solve"}'

Example:
    >>> [tool["function"]["name"] for tool in TOOLS]
    ['multiply', 'add', 'answer']
    >>> target("What is 6 * 7 + 1?"), run_tool("multiply", {"a": 6, "b": 7})
    (43, '42')
"""

from __future__ import annotations

import json
import re
from typing import Any

from openai import OpenAI  # at the top: the env pool's workers import it before any deadline starts


def _tool(name: str, description: str, **parameters: str) -> dict[str, Any]:
    properties = {key: {"type": "integer", "description": text} for key, text in parameters.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(parameters)},
        },
    }


TOOLS = [
    _tool("multiply", "Multiply two integers.", a="The first factor.", b="The second factor."),
    _tool("add", "Add two integers.", a="The first term.", b="The second term."),
    _tool("answer", "Give the final answer to the question (once).", value="The answer."),
]


def target(question: str) -> int | None:
    """The answer to ``What is A * B + C?`` (None when the question has fewer than two numbers)."""
    numbers = [int(n) for n in re.findall(r"-?\d+", question)]
    if len(numbers) < 2:
        return None
    return numbers[0] * numbers[1] + (numbers[2] if len(numbers) > 2 else 0)


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """The result of ``multiply`` or ``add`` as text; an error text for anything else, as an agent would answer."""
    try:
        if name == "multiply":
            return str(int(arguments["a"]) * int(arguments["b"]))
        if name == "add":
            return str(int(arguments["a"]) + int(arguments["b"]))
    except (KeyError, TypeError, ValueError) as error:
        return f"error: {error!r}"
    return f"error: unknown tool {name!r}"


def solve(endpoint: Any, task: str, max_steps: int = 4) -> float:
    """Answer ``task`` with the model behind ``endpoint``; the reward is 1.0 for the right answer.

    Args:
        endpoint: anything with ``base_url`` and ``api_key`` (trl-env's :class:`~trl_env.agents.Endpoint`).
        task: the question.
        max_steps: model calls at most.

    Returns:
        1.0 when ``answer`` was called with the right value, else 0.0.
    """
    client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": task + " Use the tools, then call answer()."}]
    for _ in range(max_steps):
        reply = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS)
        message = reply.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return 0.0  # the agent gave up without answering
        for call in message.tool_calls:
            arguments = json.loads(call.function.arguments or "{}")
            if call.function.name == "answer":
                return float(arguments.get("value") == target(task))
            result = run_tool(call.function.name, arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return 0.0
