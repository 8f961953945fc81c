"""The values an env pool hands back (a reply, a fault, or a contract error), and the outcomes a worker sends.

A worker (:class:`~trl_env.envpool.host.EnvHost`, in a thread or a child process) answers every call with one
small frozen, picklable dataclass, the same object on both sides of the process boundary: an :class:`EnvReply`
or an :class:`EnvFault` (handed to the pool's user as they are), a :class:`ContractBreach` (raised as
:class:`EnvContractError`), :class:`Released` or :class:`Forked`.

Example:
    >>> import pickle
    >>> pickle.loads(pickle.dumps(EnvReply("hi", 1.0, True)))
    EnvReply(delta='hi', reward=1.0, alive=True)
    >>> EnvFault("exception", "ValueError: bad seed")
    EnvFault(kind='exception', message='ValueError: bad seed')
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from trl_env.core import HistoryRewrite, ToolResult
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
        system_prompt: after ``reset`` of a :class:`~trl_env.core.SetsSystemPrompt` env, its episode's system
            prompt (None: the rollout's).
        history_rewrite: after ``step`` of a :class:`~trl_env.core.RewritesHistory` env that rewrote its
            conversation, the new messages and why (None: the conversation goes on).
    """

    delta: str
    reward: float
    alive: bool
    # left out of the repr: a plain env's replies read as before, and schemas are long
    tools: tuple[dict[str, Any], ...] = field(default=(), repr=False)
    tool_results: tuple[ToolResult, ...] = field(default=(), repr=False)
    system_prompt: str | None = field(default=None, repr=False)
    history_rewrite: HistoryRewrite | None = field(default=None, repr=False)


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


@dataclass(frozen=True)
class ContractBreach:
    """A worker's outcome when the env broke the protocol (wrong types, a factory that returned a non-env).

    The pool raises it as :class:`EnvContractError` from the call's future.

    Attributes:
        message: names the env class, the method, the seed and what was expected.
    """

    message: str


@dataclass(frozen=True)
class Released:
    """A worker's outcome of ``release``: ``metrics()`` and ``close()`` ran (each when the env has it).

    Attributes:
        metrics: what ``metrics()`` returned, checked, or None.
        warning: None, or what went wrong in ``metrics()``/``close()`` (the pool logs it).
    """

    metrics: dict[str, float] | None = None
    warning: str | None = None


@dataclass(frozen=True)
class Forked:
    """A worker's outcome of ``fork``: the copied env, for another worker to ``adopt``.

    Attributes:
        copy: the env object (thread isolation) or its pickle (process isolation; the parent never unpickles it).
    """

    copy: Any


Outcome = EnvReply | EnvFault | ContractBreach | Released | Forked
"""Everything a worker answers to one call."""
