"""Train the agent you already have: an OpenAI-compatible endpoint per episode turns an agent program into an env.

``agent_env(agent)`` (:mod:`trl_env.agents.agent_env`) is the env factory; :mod:`trl_env.agents.server` is one
episode's HTTP endpoint, :mod:`trl_env.agents.requests` what it accepts and answers, :mod:`trl_env.agents.history`
the check that each request extends the conversation trained on. See ``docs/agents.md``.
"""

from trl_env.agents.agent_env import AgentEnv, AgentError, AgentResult, Endpoint, agent_env
from trl_env.agents.history import HistoryError
from trl_env.agents.requests import RequestError

__all__ = ["AgentEnv", "AgentError", "AgentResult", "Endpoint", "HistoryError", "RequestError", "agent_env"]
