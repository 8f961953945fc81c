"""Calling user environments safely: validation, timeouts and a fault policy.

``reset``/``step`` run in a thread pool so that slow environments of one turn overlap;
each call has a timeout. A call that raises or times out is an *environment fault*: under
``on_env_error="fail_episode"`` (default) it ends that episode, under ``"raise"`` it stops
the rollout with :class:`EnvError` naming the class, seed and turn. A call that returns the
wrong types breaks the protocol: that is a bug in the environment, not a fault, and always
raises :class:`EnvContractError` at the first offending call.

A timed-out call cannot be killed (Python threads can't be); its thread is abandoned and the
episode goes on without it.

Example:
    >>> class Bad:
    ...     reward, alive = 0.0, True
    ...     def reset(self, seed):
    ...         return self, 42
    >>> validate_result(Bad(), Bad().reset("s"), "reset", "s")
    Traceback (most recent call last):
    ...
    trl_env.engine.env_calls.EnvContractError: Bad.reset(seed='s') returned a 2-tuple whose delta is int, expected str
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from trl_env.core import Env


class EnvContractError(TypeError):
    """An environment returned something the protocol does not allow."""


class EnvError(RuntimeError):
    """An environment raised or timed out under ``on_env_error="raise"``."""


@dataclass
class EnvFault:
    """What went wrong in one environment call."""

    kind: str  # "exception" or "timeout"
    message: str

    def describe(self, env: object, seed: str, turn: int) -> str:
        """One line naming the class, seed, turn and error."""
        return f"{type(env).__name__} (seed={seed!r}, turn={turn}): {self.kind}: {self.message}"


def validate_result(env: object, result: Any, method: str, seed: str) -> tuple[Env, str]:
    """Check what ``reset``/``step`` returned and the env's ``reward``/``alive``; return ``(env, delta)``.

    Example:
        >>> class Ok:
        ...     reward, alive = 1, True
        ...     def reset(self, seed):
        ...         return self, "hi"
        ...     def step(self, action):
        ...         return self, action
        >>> validate_result(Ok(), Ok().reset("s"), "reset", "s")[1]
        'hi'
    """
    where = f"{type(env).__name__}.{method}(seed={seed!r})"
    if not (isinstance(result, tuple) and len(result) == 2):
        raise EnvContractError(f"{where} returned {type(result).__name__}, expected a tuple (env, delta)")
    new_env, delta = result
    if not isinstance(delta, str):
        raise EnvContractError(f"{where} returned a 2-tuple whose delta is {type(delta).__name__}, expected str")
    for obj in (new_env,):
        name = type(obj).__name__
        if not callable(getattr(obj, "step", None)):
            raise EnvContractError(f"{where} returned an env of type {name} with no step() method")
        reward = getattr(obj, "reward", None)
        if isinstance(reward, bool) or not isinstance(reward, int | float) or not math.isfinite(reward):
            raise EnvContractError(f"{name}.reward after {method} is {reward!r}, expected a finite float")
        alive = getattr(obj, "alive", None)
        if not isinstance(alive, bool):
            raise EnvContractError(f"{name}.alive after {method} is {alive!r}, expected a bool")
    return new_env, delta


class EnvCaller:
    """Runs many envs' ``reset``/``step`` calls concurrently with a per-call timeout.

    Example:
        >>> class Echo:
        ...     reward, alive = 0.0, True
        ...     def reset(self, seed):
        ...         return self, seed
        ...     def step(self, action):
        ...         return self, action
        >>> with EnvCaller(workers=2, timeout=5.0) as caller:
        ...     [r[1] for r in caller.reset_all([(Echo(), "a"), (Echo(), "b")])]
        ['a', 'b']
    """

    def __init__(self, *, workers: int = 8, timeout: float | None = None) -> None:
        self.timeout = timeout
        self.workers = max(1, workers)
        self.abandoned = False  # a call timed out: its thread may still be busy, so the pool is not reused
        self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="trl-env")

    def __enter__(self) -> EnvCaller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop taking calls; threads of timed-out calls are left to finish on their own."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def reset_all(self, calls: list[tuple[Env, str]]) -> list[tuple[Env, str] | EnvFault]:
        """``env.reset(seed)`` for each ``(env, seed)``: ``(env, delta)`` or an :class:`EnvFault` each."""
        raw = self._run([(env.reset, seed) for env, seed in calls], "reset")
        return [self._checked(env, result, "reset", seed) for (env, seed), result in zip(calls, raw, strict=True)]

    def step_all(self, calls: list[tuple[Env, str, str]]) -> list[tuple[Env, str] | EnvFault]:
        """``env.step(action)`` for each ``(env, action, seed)``: ``(env, delta)`` or an :class:`EnvFault` each."""
        raw = self._run([(env.step, action) for env, action, _ in calls], "step")
        return [self._checked(env, result, "step", seed) for (env, _, seed), result in zip(calls, raw, strict=True)]

    def run_all(self, calls: list[Callable[[], Any]], what: str) -> list[Any | EnvFault]:
        """Run zero-argument env callables (``metrics``, ``close``) with the same timeout and fault capture."""
        return self._run([(call, None) for call in calls], what)

    @staticmethod
    def _checked(env: Env, result: Any, method: str, seed: str) -> tuple[Env, str] | EnvFault:
        return result if isinstance(result, EnvFault) else validate_result(env, result, method, seed)

    def _run(self, calls: list[tuple[Callable[..., Any], Any]], what: str) -> list[Any]:
        futures = [self._pool.submit(fn) if arg is None else self._pool.submit(fn, arg) for fn, arg in calls]
        results: list[Any] = []
        for future in futures:
            try:
                results.append(future.result(timeout=self.timeout))
            except FutureTimeout:
                future.cancel()
                self.abandoned = True
                results.append(EnvFault("timeout", f"{what} took longer than {self.timeout} s"))
            except Exception as error:  # the env's own fault: reported, never fatal here
                results.append(EnvFault("exception", f"{type(error).__name__}: {error}"))
        return results
