"""An OpenAI Agents SDK agent for the agent tests, in its own module: the workers that run it import the SDK.

An ``agents.Agent`` with one ``function_tool``, on ``OpenAIChatCompletionsModel`` (the chat-completions API, which
the episode's endpoint serves) with an ``AsyncOpenAI`` client pointed at the endpoint, run by
``Runner.run_sync`` for at most :data:`MODEL_TURNS` model turns. Tracing is off (the SDK would export traces to
OpenAI; nothing may leave the machine).
"""

from __future__ import annotations

from typing import Any

from agents import Agent, MaxTurnsExceeded, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

from trl_env.agents import AgentResult

set_tracing_disabled(True)
MODEL_TURNS = 3
CALLS: list[tuple[int, int]] = []  # the tool's calls in this process (a thread-isolated test reads them)


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    CALLS.append((a, b))
    return a * b


def calculator(endpoint: Any, task: str) -> AgentResult:
    """The SDK's own tool loop; 1.0 when its final output says 42, 0.0 when it runs out of turns."""
    client = AsyncOpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    agent = Agent(
        name="calculator",
        instructions="Use the multiply tool, then answer with the number.",
        model=OpenAIChatCompletionsModel(model="policy", openai_client=client),
        tools=[multiply],
    )
    try:
        output = str(Runner.run_sync(agent, task, max_turns=MODEL_TURNS).final_output)
    except MaxTurnsExceeded:  # the SDK's own limit: the agent never answered
        return AgentResult(0.0, {"max_turns_exceeded": 1.0})
    return AgentResult(1.0 if "42" in output else 0.0, {"max_turns_exceeded": 0.0})
