"""Envs of the per-turn history tests, in a light module: env workers are processes that import it."""

from __future__ import annotations

import itertools

from trl_env.chat.tool_calls import parse_tool_calls
from trl_env.core import ToolResult


def lookup(key: str) -> str:
    """Look a key up in the store.

    Args:
        key: the key to read.
    """
    return f"value of {key}"


class Talk:
    """Answers every turn with a short line; ends after ``turns`` model turns. Each turn's reward comes from the
    action's length (so a random model's episodes differ)."""

    turns = 3

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str):
        self.reward, self.alive, self.turn = 0.0, True, 0
        return self, f"Start of game {seed}. Say a number."

    def step(self, action: str):
        self.turn += 1
        self.reward += (len(action) % 3) / 2
        self.alive = self.turn < self.turns
        return self, f"Turn {self.turn} seen: {action[:20]!r}. Next."


class TalkApart(Talk):
    """``Talk`` whose group can never score alike: every other reset (one counter for the process) adds 10 to the
    first turn's reward, more than ``Talk`` can pay in all, so any 2 consecutive episodes' rewards differ and a GRPO
    step has advantages to train on, whatever a random model samples."""

    resets = itertools.count()

    def reset(self, seed: str):
        self.bonus = 10.0 * (next(TalkApart.resets) % 2)
        return super().reset(seed)

    def step(self, action: str):
        env, text = super().step(action)
        self.reward += self.bonus if self.turn == 1 else 0.0
        return env, text


class LongCorridor(Talk):
    """A 40-turn corridor: each step moves one room on; the observation is a room description of ~15 tokens."""

    turns = 40

    def reset(self, seed: str):
        super().reset(seed)
        return self, f"You stand at the start of a corridor of {self.turns} rooms ({seed}). Walk on."

    def step(self, action: str):
        self.turn += 1
        self.reward += 1.0 / self.turns
        self.alive = self.turn < self.turns
        return self, f"Room {self.turn}: a grey room with a door to the east. Walk on."


class Lookup:
    """A tool env: answers each lookup call with its result, then asks for more, for ``turns`` turns."""

    tools = [lookup]
    turns = 3

    def __init__(self) -> None:
        self.reward, self.alive, self.tool_results, self.turn = 0.0, True, (), 0

    def reset(self, seed: str):
        self.reward, self.alive, self.tool_results, self.turn = 0.0, True, (), 0
        return self, f"Find the value of key {seed}."

    def step(self, action: str):
        self.turn += 1
        _, calls = parse_tool_calls(action)
        self.tool_results = tuple(ToolResult(c.name, c.error or lookup(**c.arguments)) for c in calls)
        self.reward += float(bool(calls))
        self.alive = self.turn < self.turns
        return self, "" if calls else "Use the lookup tool."
