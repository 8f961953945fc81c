"""A smolagents agent for the agent tests, in its own module: smolagents is imported by the workers that run it."""

from __future__ import annotations

from typing import Any

from smolagents import OpenAIServerModel, ToolCallingAgent, tool


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


def calculator(endpoint: Any, task: str) -> float:
    """A ToolCallingAgent on OpenAIServerModel pointed at the episode's endpoint; 1.0 when it answers 42."""
    model = OpenAIServerModel(model_id="policy", api_base=endpoint.base_url, api_key=endpoint.api_key)
    model.client = model.client.with_options(max_retries=0)  # a refused request must not be resent
    agent = ToolCallingAgent(tools=[multiply], model=model, max_steps=3, verbosity_level=0)
    return float(str(agent.run(task)) == "42")
