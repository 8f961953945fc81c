"""The worker side of the env pool: one env, its calls, and the checks on what they return.

:class:`EnvHost` holds one worker's env and turns every call into a plain, picklable *outcome*
dataclass (:mod:`trl_env.envpool.replies`), so the same code serves a daemon thread (thread isolation) and a
child process (process isolation); :mod:`trl_env.envpool.host_loops` runs it there, and the parent uses what
arrives as it is:

- :class:`~trl_env.envpool.replies.EnvReply`: the call returned; ``reward`` is a float, ``alive`` a bool; a
  :class:`~trl_env.core.UsesTools` env's reply adds its tools' JSON schemas (after ``reset``) and its
  :class:`~trl_env.core.ToolResult` tuple (after ``step``);
- :class:`~trl_env.envpool.replies.EnvFault` (kind ``"exception"``): env code raised (any ``BaseException``,
  ``SystemExit`` included);
- :class:`~trl_env.envpool.replies.ContractBreach`: the env broke the protocol (wrong types, factory returned a
  non-env);
- :class:`~trl_env.envpool.replies.Released`: ``release`` ran ``metrics()``/``close()``; its ``warning`` is
  ``None`` or what went wrong in them;
- :class:`~trl_env.envpool.replies.Forked`: ``fork`` copied the env (:mod:`trl_env.envpool.forking`): the env
  object (thread isolation) or its pickle (process isolation), for another worker to ``adopt``.

Example:
    >>> class Coin:
    ...     reward, alive = 0, True
    ...     def reset(self, seed):
    ...         return self, f"seed {seed}"
    ...     def step(self, action):
    ...         self.reward, self.alive = 1, False
    ...         return self, "done"
    >>> host = EnvHost(Coin, reuse=False)
    >>> host.handle("reset", "7")
    EnvReply(delta='seed 7', reward=0.0, alive=True)
    >>> forked = host.handle("fork", "")
    >>> other = EnvHost(Coin, reuse=False)
    >>> other.handle("adopt", ("7", forked.copy))
    EnvReply(delta='', reward=0.0, alive=True)
    >>> host.handle("step", "heads")
    EnvReply(delta='done', reward=1.0, alive=False)
    >>> other.env.alive, other.env is not host.env
    (True, True)
    >>> host.handle("release", "")
    Released(metrics=None, warning=None)
    >>> type(host.handle("step", "again")).__name__
    'ContractBreach'
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from typing import Any

from trl_env.core import (
    Closable,
    ReportsMetrics,
    RewritesHistory,
    SetsSystemPrompt,
    ToolResult,
    UsesTools,
)
from trl_env.envpool.forking import ForkError, fork_bytes, fork_env
from trl_env.envpool.replies import ContractBreach, EnvFault, EnvReply, Forked, Outcome, Released
from trl_env.envpool.values import check_history_rewrite, check_metrics, describe, to_alive, to_reward, to_text
from trl_env.errors import DataError


class EnvHost:
    """One worker's env: builds it with the factory, runs its calls, releases it.

    Args:
        factory: builds an env (called inside the worker, at ``reset`` when no env is kept).
        reuse: keep the env after ``release`` and warm-``reset`` it for the next episode.
        load_error: set when the factory could not be unpickled in this worker; every reset reports it.
        pickled_forks: ``fork`` returns the copy pickled and ``adopt`` unpickles it (process workers).
    """

    def __init__(
        self,
        factory: Callable[[], Any] | None,
        *,
        reuse: bool,
        load_error: str | None = None,
        pickled_forks: bool = False,
    ) -> None:
        self.factory, self.reuse, self.load_error, self.pickled_forks = factory, reuse, load_error, pickled_forks
        self.env: Any = None
        self.seed: str | None = None
        self.in_episode = False

    def handle(self, op: str, arg: Any) -> Outcome:
        """Run ``op`` and return its outcome (:data:`~trl_env.envpool.replies.Outcome`).

        ``op`` is "reset" (arg: the seed), "step" (the action), "fork" (copy the env), "adopt" (arg: the
        seed and a ``fork``'s copy: continue the episode with it), "release" or "shutdown".
        """
        if op == "reset":
            return self._reset(arg)
        if op == "adopt":
            return self._adopt(*arg)
        if op == "fork":
            if not self.in_episode or self.env is None:
                return ContractBreach("fork() with no env: reset() did not build one or the slot was released")
            return self._fork()
        if op == "release":
            return self._release(close=not self.reuse)
        if op == "shutdown":
            return self._shutdown()
        if op == "step":
            if not self.in_episode or self.env is None:
                return ContractBreach(f"step({arg!r}) with no env: reset() did not build one or the slot was released")
            return self._call(self.env, "step", arg)
        raise DataError(f"unknown env-worker operation {op!r}")

    def _reset(self, seed: str) -> Outcome:
        self.seed, self.in_episode = seed, True
        if self.load_error is not None:
            return EnvFault("exception", self.load_error)
        if self.env is None:
            try:
                env = self.factory()  # type: ignore[misc]
            except BaseException as error:  # the env's own code: SystemExit/KeyboardInterrupt too
                return EnvFault("exception", f"env_factory raised {describe(error)}")
            missing = [name for name in ("reset", "step") if not callable(getattr(env, name, None))]
            if missing:
                name = getattr(self.factory, "__qualname__", repr(self.factory))
                return ContractBreach(
                    f"env_factory {name} returned {type(env).__name__}, which has no {'()/'.join(missing)}() "
                    f"method (seed={seed!r}); it must return an env with reset(seed) and step(action)",
                )
            self.env = env
        return self._call(self.env, "reset", seed)

    def _fork(self) -> Outcome:
        try:
            copied = fork_bytes(self.env) if self.pickled_forks else fork_env(self.env)
        except ForkError as error:  # cannot be copied at all: a property of the env class, not of this call
            return ContractBreach(f"{error} (seed={self.seed!r})")
        except BaseException as error:  # the env's own fork() raised: a fault, as in step()
            return EnvFault("exception", f"fork() raised {describe(error)}")
        return Forked(copied)

    def _adopt(self, seed: str, copied: Any) -> Outcome:
        """Continue the episode of ``seed`` with another worker's ``fork`` copy; the reply's delta is ``""``."""
        if self.env is not None:  # reuse_envs: the env kept from this worker's last episode gives way to the copy
            self._shutdown()  # its close() failing must not stop the fork (no one is waiting for that env)
        self.seed, self.in_episode = seed, True
        if self.pickled_forks:
            try:
                copied = pickle.loads(copied)
            except BaseException as error:
                return EnvFault("exception", f"could not load the forked env in this worker: {describe(error)}")
        return self._accept(copied, (copied, ""), "fork")

    def _call(self, env: Any, method: str, arg: str) -> Outcome:
        try:
            result = getattr(env, method)(arg)
        except BaseException as error:
            return EnvFault("exception", describe(error))
        return self._accept(env, result, method)

    def _accept(self, env: Any, result: Any, method: str) -> Outcome:
        """Check ``(env, delta)`` and the returned env's reward/alive; keep the returned env."""
        where = f"{type(env).__name__}.{method}(seed={self.seed!r})"
        if not (isinstance(result, tuple) and len(result) == 2):
            return ContractBreach(f"{where} returned {type(result).__name__}, expected a tuple (env, delta)")
        new_env, delta = result
        if not isinstance(delta, str):
            return ContractBreach(f"{where} returned a 2-tuple whose delta is {type(delta).__name__}, expected str")
        if not callable(getattr(new_env, "step", None)):
            return ContractBreach(f"{where} returned an env of type {type(new_env).__name__} with no step() method")
        name = f"{type(new_env).__name__}.reward after {method}(seed={self.seed!r})"
        raw_reward = getattr(new_env, "reward", None)
        reward = to_reward(raw_reward)
        if reward is None:
            return ContractBreach(f"{name} is {raw_reward!r}, expected a finite float")
        raw_alive = getattr(new_env, "alive", None)
        alive = to_alive(raw_alive)
        if alive is None:
            return ContractBreach(f"{name.replace('.reward', '.alive')} is {raw_alive!r}, expected a bool")
        self.env = new_env
        delta = to_text(delta)  # the tokenizer refuses lone surrogates: the whole rollout would stop there
        system_prompt = None
        if method == "reset" and isinstance(new_env, SetsSystemPrompt):
            system_prompt = new_env.system_prompt
            if not isinstance(system_prompt, str):
                return ContractBreach(f"{where}: system_prompt is {type(system_prompt).__name__}, expected str")
            system_prompt = to_text(system_prompt)
        if isinstance(new_env, UsesTools):
            reply = self._tool_reply(new_env, method, where, (delta, reward, alive))
            return dataclasses.replace(reply, system_prompt=system_prompt) if isinstance(reply, EnvReply) else reply
        return EnvReply(delta, reward, alive, system_prompt=system_prompt)

    def _tool_reply(self, env: UsesTools, method: str, where: str, reply: tuple[str, float, bool]) -> Outcome:
        """A tool env's reply: its tools as JSON schemas after ``reset``, its tool results after ``step``."""
        from trl_env.chat.tool_calls import tool_schema

        if method == "reset":
            try:
                tools = tuple(tool_schema(tool) for tool in env.tools)
            except Exception as error:  # a tool without type hints or docstring, a non-JSON schema
                return ContractBreach(f"{where}: cannot declare its tools: {describe(error)}")
            return EnvReply(*reply, tools=tools)
        results = []
        for result in env.tool_results:
            if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(x, str) for x in result)):
                return ContractBreach(f"{where}: tool_results holds {result!r:.80}, expected ToolResult(name, content)")
            results.append(ToolResult(result[0], to_text(result[1])))
        rewrite, breach = check_history_rewrite(
            env.history_rewrite if isinstance(env, RewritesHistory) else None, where
        )
        if breach is not None:
            return ContractBreach(breach)
        return EnvReply(*reply, tool_results=tuple(results), history_rewrite=rewrite)

    def _shutdown(self) -> Outcome:
        """The pool is closing (or this worker was abandoned): ``close()`` the env, if any, without metrics."""
        env, self.env, self.in_episode = self.env, None, False
        if isinstance(env, Closable):
            try:
                env.close()
            except BaseException as error:
                return Released(None, f"{type(env).__name__}.close() raised {describe(error)}")
        return Released(None, None)

    def _release(self, *, close: bool) -> Outcome:
        """``metrics()`` then (unless the env is kept) ``close()``; both optional, both always tried."""
        env, self.in_episode = self.env, False
        if env is None:
            return Released(None, None)
        where = f"{type(env).__name__}.%s (seed={self.seed!r})"
        metrics, contract, problem = None, None, None
        if isinstance(env, ReportsMetrics):
            try:
                metrics, contract = check_metrics(env.metrics(), where % "metrics()")
            except BaseException as error:
                problem = f"{where % 'metrics()'} raised {describe(error)}"
        if close:
            self.env = None
            if isinstance(env, Closable):
                try:
                    env.close()
                except BaseException as error:
                    problem = f"{where % 'close()'} raised {describe(error)}"
        if contract is not None:
            return ContractBreach(contract)
        return Released(metrics, problem)
