"""The values an env pool hands back: a reply, a fault, or a contract error.

Example:
    >>> reply(("reply", "hi", 1.0, True))
    EnvReply(delta='hi', reward=1.0, alive=True)
    >>> reply(("fault", "ValueError: bad seed"))
    EnvFault(kind='exception', message='ValueError: bad seed')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from trl_env.core import ToolResult
from trl_env.errors import TrlEnvError


@dataclass(frozen=True)
class EnvReply:
    """What an env call returned, read in the worker right after the call.

    Attributes:
        delta: the text the env appended.
        reward: the episode's score so far, as a float.
        alive: False once the episode is over.
        tools: after ``reset`` of a :class:`~trl_env.core.UsesTools` env, its tools as JSON schemas
            (converted in the worker: env objects and their methods never leave it).
        tool_results: after ``step`` of such an env, one result per tool call of the turn; the engine
            renders them as ``tool`` messages instead of a user message.
    """

    delta: str
    reward: float
    alive: bool
    # left out of the repr: a plain env's replies read as before, and schemas are long
    tools: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    tool_results: tuple[ToolResult, ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class EnvFault:
    """The env's own failure in one call; returned by the pool, never raised.

    Attributes:
        kind: ``"exception"`` (env code raised, ``SystemExit`` included), ``"timeout"`` (past the
            deadline) or ``"crash"`` (the process worker died: ``os._exit``, a segfault).
        message: e.g. ``"ValueError: bad seed"``, ``"step took longer than 2.0 s"``,
            ``"worker died with exit code -11 (SIGSEGV) during step"``.
    """

    kind: Literal["exception", "timeout", "crash"]
    message: str


class EnvContractError(TrlEnvError, TypeError):
    """The env broke the protocol; the message names the env class, the method and the seed."""


def reply(outcome: tuple[Any, ...]) -> EnvReply | EnvFault:
    """A worker's ``reply``/``fault`` outcome as the public type."""
    if outcome[0] == "reply":
        return EnvReply(*outcome[1:])
    return EnvFault("exception", outcome[1])
