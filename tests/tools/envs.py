"""TRL-style and native tool envs of the tool tests, in a light module: process workers import it."""

from __future__ import annotations

from trl_env.chat.tool_calls import parse_tool_calls
from trl_env.core import ToolResult

OBSERVATION = "Call the step tool to play a turn."


class StepGame:
    """A class written for TRL's environment_factory: one ``step`` tool; the reward counts the steps."""

    def reset(self, **kwargs) -> str:
        self.turn, self.reward = 0, 0.0
        return OBSERVATION

    def step(self) -> str:
        """Play one turn of the game.

        Returns:
            What the game says about the turn.
        """
        self.turn += 1
        self.reward += 1.0
        return f"Turn {self.turn}: {'higher' if self.turn % 2 else 'lower'}."

    def get_reward(self) -> float:
        return self.reward


def ping() -> str:
    """Check that the game server answers."""
    return "pong"


class NativePing:
    """A trl-env tool env written directly (UsesTools): answers each ping call, then a user line."""

    tools = [ping]

    def __init__(self) -> None:
        self.reward, self.alive, self.tool_results = 0.0, True, ()

    def reset(self, seed: str):
        self.reward, self.alive, self.tool_results = 0.0, True, ()
        return self, f"Ping the server {seed}."

    def step(self, action: str):
        _, calls = parse_tool_calls(action)
        self.tool_results = tuple(ToolResult(c.name, c.error or ping()) for c in calls)
        self.reward += float(bool(calls))
        self.alive = bool(calls)
        return self, "Keep going." if calls else ""


LOG_LINE = "2024-05-01 12:00:00 INFO request served\n"


class LogReader:
    """A native tool env whose tool prints a huge log at every turn, whatever the model wrote."""

    tools = [ping]

    def __init__(self) -> None:
        self.reward, self.alive, self.tool_results = 0.0, True, ()

    def reset(self, seed: str):
        self.reward, self.alive, self.tool_results = 0.0, True, ()
        return self, "Read the server log."

    def step(self, action: str):
        self.tool_results = (ToolResult("ping", LOG_LINE * 2000),)
        return self, ""
