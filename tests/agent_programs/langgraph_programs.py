"""A LangGraph agent for the agent tests, in its own module: the workers that run it import LangGraph.

A ``StateGraph`` of two nodes, the model (``langchain_openai.ChatOpenAI`` pointed at the episode's endpoint, with
the tool bound) and LangGraph's prebuilt ``ToolNode``, looping while the model calls tools, for at most
:data:`MODEL_TURNS` model turns. LangSmith tracing is off (nothing may leave the machine).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode

from trl_env.agents import AgentResult

os.environ["LANGSMITH_TRACING"] = "false"  # LangChain's tracer would export runs to LangSmith
MODEL_TURNS = 3
CALLS: list[tuple[int, int]] = []  # the tool's calls in this process (a thread-isolated test reads them)


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    CALLS.append((a, b))
    return a * b


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def calculator(endpoint: Any, task: str) -> AgentResult:
    """Model and tool nodes in a loop; 1.0 when the model's last answer (without a tool call) says 42."""
    model = ChatOpenAI(model="policy", base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    model = model.bind_tools([multiply])

    def call_model(state: State) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: State) -> str:
        turns = sum(1 for m in state["messages"] if m.type == "ai")
        return "tools" if state["messages"][-1].tool_calls and turns < MODEL_TURNS else END

    graph = StateGraph(State)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode([multiply]))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", route, ["tools", END])
    graph.add_edge("tools", "model")
    opening = [SystemMessage("Use the multiply tool, then answer with the number."), HumanMessage(task)]
    final = graph.compile().invoke({"messages": opening})["messages"][-1]
    right = not final.tool_calls and "42" in str(final.content)
    return AgentResult(float(right), {"tool_calls": float(len(CALLS))})
