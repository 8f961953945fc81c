"""The calculator task written as an ordinary ``openai``-SDK agent, trained unchanged through ``agent_env``."""

from .agent import TOOLS, solve

__all__ = ["TOOLS", "solve"]
