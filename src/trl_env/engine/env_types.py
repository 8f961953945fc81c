"""The values an env pool hands back: a reply, a fault, or a contract error.

Example:
    >>> reply(("reply", "hi", 1.0, True))
    EnvReply(delta='hi', reward=1.0, alive=True)
    >>> reply(("fault", "ValueError: bad seed"))
    EnvFault(kind='exception', message='ValueError: bad seed')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class EnvReply:
    """What an env call returned, read in the worker right after the call.

    Attributes:
        delta: the text the env appended.
        reward: the episode's score so far, as a float.
        alive: False once the episode is over.
    """

    delta: str
    reward: float
    alive: bool


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


class EnvContractError(TypeError):
    """The env broke the protocol; the message names the env class, the method and the seed."""


def reply(outcome: tuple[Any, ...]) -> EnvReply | EnvFault:
    """A worker's ``reply``/``fault`` outcome as the public type."""
    if outcome[0] == "reply":
        return EnvReply(*outcome[1:])
    return EnvFault("exception", outcome[1])
