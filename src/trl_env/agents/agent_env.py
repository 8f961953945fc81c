"""``agent_env(agent)``: an env whose episode runs an agent program that calls the model over the OpenAI API.

The agent is the user's own program, ``agent(endpoint, task) -> reward``: it gets an :class:`Endpoint` (a base URL
and an API key for this episode only; ``endpoint.openai_client()`` builds an ``openai.OpenAI`` on it) and the
episode's seed as its task, owns its loop and returns its reward (a number, or an :class:`AgentResult` or any
object with ``reward`` and optionally ``metrics``). Each chat request it sends is one model turn:

* ``reset(seed)`` starts the episode's endpoint (:class:`~trl_env.agents.server.EpisodeServer`) and runs the agent
  in a thread; it returns at the agent's first request: the user message is the delta, the system message the
  episode's ``system_prompt``, the request's tools the env's ``tools``;
* ``step(action)`` sends the model's answer (its text and its tool calls, parsed as every tool env's are) to the
  waiting request, then waits for the next request (its added tool results are the env's ``tool_results``, its
  user message the delta) or for the agent's return (``alive`` False, its ``reward`` and metrics).

The engine renders and samples as for any tool env, batching the agents' turns with every other episode's; the
agent gets the decoded answer, training uses the sampled ids. Each request must extend the conversation
(:mod:`trl_env.agents.history`), else the episode fails. Faults are the episode's own: the agent raising or
returning no reward, or never calling the model, raises :class:`AgentError` (the episode fails with it); a hang is
the pool's ``env_timeout``; after ``max_turns`` answers, requests get an error response and the episode ends with
the agent's return.

Example:
    >>> def agent(endpoint, task):
    ...     return float(task == "7")
    >>> env = agent_env(agent)()
    >>> env.reset("7")
    Traceback (most recent call last):
    ...
    trl_env.agents.agent_env.AgentError: the agent returned 1.0 without calling the model: an episode needs at \
least one model turn
"""

from __future__ import annotations

import functools
import math
import queue
import secrets
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trl_env.agents.history import (
    HISTORY_POLICIES,
    HistoryError,
    added_messages,
    env_turn,
    first_turn,
    template_messages,
)
from trl_env.agents.requests import response_body
from trl_env.agents.server import EpisodeServer, PendingRequest
from trl_env.chat.tool_calls import parse_tool_calls
from trl_env.core import HistoryRewrite, ToolResult
from trl_env.errors import ConfigError, ConfigTypeError, TrlEnvError


class AgentError(TrlEnvError, RuntimeError):
    """The agent program failed its episode: it raised, returned no reward, or never called the model."""


@dataclass(frozen=True)
class Endpoint:
    """Where an episode's agent reaches the model: an OpenAI-compatible ``base_url`` and its API key.

    Example:
        >>> Endpoint("http://127.0.0.1:8000/v1", "key").model
        'trl-env'
    """

    base_url: str
    api_key: str
    model: str = "trl-env"  # any name is served: the policy being trained answers

    def openai_client(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client on this endpoint (retries off: a refused request must not be resent)."""
        from openai import OpenAI

        return OpenAI(base_url=self.base_url, api_key=self.api_key, **{"max_retries": 0, **kwargs})


@dataclass(frozen=True)
class AgentResult:
    """What an agent may return instead of a bare reward: the reward and per-episode metrics."""

    reward: float
    metrics: Mapping[str, float] = field(default_factory=dict)


def _reward_and_metrics(result: Any) -> tuple[float, dict[str, float]]:
    """The agent's return as ``(reward, metrics)``; :class:`AgentError` when it holds no finite reward."""
    raw, metrics = getattr(result, "reward", result), getattr(result, "metrics", {})
    if isinstance(result, Mapping):
        raw, metrics = result.get("reward"), result.get("metrics", {})
    try:
        reward = float(raw)
    except (TypeError, ValueError):
        reward = math.nan
    if not math.isfinite(reward) or isinstance(raw, str):
        raise AgentError(f"the agent returned {result!r:.200}; expected a finite reward or an object with .reward")
    if not isinstance(metrics, Mapping):
        raise AgentError(f"the agent's metrics are {type(metrics).__name__}, expected a mapping of name -> number")
    return reward, {str(key): float(value) for key, value in metrics.items()}


def _describe(error: BaseException) -> str:
    """``"ValueError: bad (agent.py:12)"``: the error and where the agent's code raised it."""
    frames = traceback.extract_tb(error.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return "".join(traceback.format_exception_only(type(error), error)).strip() + where


class AgentEnv:
    """The env of :func:`agent_env` (a :class:`~trl_env.core.UsesTools` env that also sets its system prompt).

    Args:
        agent: the agent program, ``agent(endpoint, task) -> reward``.
        max_turns: model answers per episode; a request after the last one gets an error response and the episode
            ends with the agent's return (None: no bound here, the rollout's ``max_turns`` still ends the episode).
        on_history_rewrite: what a request that does not extend the conversation does: ``"fail"`` its episode
            (:class:`~trl_env.agents.history.HistoryError`), or ``"split"``: the next model turn's prompt is the
            template's rendering of the request's messages, a new sample (needs ``history="template"``/``"window"``).
        close_timeout: seconds ``close()`` waits for the agent to return once its requests are refused.
    """

    def __init__(
        self,
        agent: Callable[[Endpoint, str], Any],
        *,
        max_turns: int | None = None,
        on_history_rewrite: str = "fail",
        close_timeout: float = 5.0,
    ) -> None:
        if not callable(agent):
            raise ConfigTypeError(f"agent_env(agent=...) must be callable, got {type(agent).__name__}")
        if on_history_rewrite not in HISTORY_POLICIES:
            raise ConfigError(
                f"agent_env on_history_rewrite must be one of {HISTORY_POLICIES}, got {on_history_rewrite!r}"
            )
        if max_turns is not None and max_turns < 1:
            raise ConfigError(f"agent_env max_turns must be >= 1 or None, got {max_turns}")
        self.agent, self.max_turns, self.close_timeout = agent, max_turns, close_timeout
        self.on_history_rewrite = on_history_rewrite
        self.history_rewrite: HistoryRewrite | None = None
        self._rewrites = 0
        self.reward, self.alive, self.system_prompt = 0.0, True, ""
        self.tools: tuple[dict[str, Any], ...] = ()
        self.tool_results: tuple[ToolResult, ...] = ()
        self._server: EpisodeServer | None = None
        self._thread: threading.Thread | None = None
        self._events: queue.Queue = queue.Queue()
        self._conversation: list[dict[str, Any]] = []
        self._model, self._answers, self._requests, self._metrics = "", 0, 0, {}
        self._stop: tuple[str, ...] = ()
        self._stops_sampled = 0

    def reset(self, seed: str) -> tuple[AgentEnv, str]:
        """Start the episode's endpoint and agent; return at its first request (its user message is the delta)."""
        self.close()
        self.reward, self.alive, self.tool_results, self._answers, self._requests = 0.0, True, (), 0, 0
        self._events, self._metrics, self._stops_sampled = queue.Queue(), {}, 0
        self.history_rewrite, self._rewrites = None, 0
        api_key = "trl-env-" + secrets.token_hex(8)
        self._server = EpisodeServer(self._events, api_key)
        endpoint = Endpoint(self._server.base_url, api_key)
        self._thread = threading.Thread(target=self._run, args=(endpoint, seed), name="trl-env-agent", daemon=True)
        self._thread.start()
        pending = self._next_request()
        if pending is None:
            raise AgentError(
                f"the agent returned {self.reward!r} without calling the model: "
                "an episode needs at least one model turn"
            )
        request = pending.request
        self.system_prompt, delta = first_turn(request.messages)
        self.tools, self._model, self._stop = request.tools, request.model, request.stop
        self._conversation = list(request.messages)
        return self, delta

    def step(self, action: str) -> tuple[AgentEnv, str]:
        """Answer the waiting request with the model's turn; return at the agent's next request or its return."""
        assert self._server is not None, "step() before reset()"
        text, calls = parse_tool_calls(action)
        body = response_body(self._model, text, calls, self._answers)
        message = body["choices"][0]["message"]
        answer = {"role": "assistant", "content": message["content"] or ""}
        if calls:
            answer["tool_calls"] = [
                {"name": c.name, "arguments": c.arguments, "id": t["id"]}
                for c, t in zip(calls, message["tool_calls"], strict=True)
            ]
        self._stops_sampled += any(stop in action for stop in self._stop)
        self._server.answer(200, body)
        self._answers += 1
        self._conversation.append(answer)
        self.tool_results, self.history_rewrite = (), None
        while True:
            pending = self._next_request()
            if pending is None:
                return self, ""
            if self.max_turns is None or self._answers < self.max_turns:
                break
            self._server.refuse_all(f"the episode's turn budget is spent ({self.max_turns} model turns)")
        request = pending.request
        try:
            if request.tools != self.tools:
                raise HistoryError("the agent's request changed its tools: the prompt declared the previous tools")
            self.tool_results, delta = env_turn(added_messages(self._conversation, request.messages), answer)
        except HistoryError as error:
            if self.on_history_rewrite != "split":
                raise
            # the conversation goes on from the agent's messages (and tools): the engine renders them as the next prompt
            tools = request.tools if request.tools != self.tools else None
            self.history_rewrite = HistoryRewrite(template_messages(request.messages), str(error), tools)
            self.tools, delta = request.tools, ""
            self._rewrites += 1
        self._conversation, self._stop = list(request.messages), request.stop
        return self, delta

    def _run(self, endpoint: Endpoint, task: str) -> None:
        """The agent thread: run the program, then put its return (or error) on the event queue."""
        try:
            self._events.put(("done", self.agent(endpoint, task)))
        except BaseException as error:  # any failure of the agent is its episode's, reported by step/reset
            self._events.put(("error", error))

    def _next_request(self) -> PendingRequest | None:
        """The agent's next request in wait; None once the agent returned (reward set, episode over)."""
        while True:
            kind, value = self._events.get()
            if kind == "request":
                if value.answered:  # refused while queued (turn budget spent): the agent got its answer
                    continue
                self._requests += 1
                return value
            if kind == "error":
                refused = self._server.refused if self._server is not None else []
                note = f"; the endpoint refused {len(refused)} request(s), the last: {refused[-1]}" if refused else ""
                raise AgentError(f"the agent raised {_describe(value)}{note}")
            self.reward, self._metrics = _reward_and_metrics(value)
            self.alive = False
            return None

    def metrics(self) -> dict[str, float]:
        """The agent's requests (answered, refused), answers holding a stop sequence, then the agent's metrics."""
        refused = len(self._server.refused) if self._server is not None else 0
        return {
            "agent_requests": float(self._requests),
            "agent_refused_requests": float(refused),
            "agent_stop_sequences_sampled": float(self._stops_sampled),
            **({"agent_history_rewrites": float(self._rewrites)} if self.on_history_rewrite == "split" else {}),
            **self._metrics,
        }

    def close(self) -> None:
        """Refuse the agent's requests, stop the endpoint and wait up to ``close_timeout`` s for the agent to return."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is not None:
            server.close("the episode is over")
        if thread is not None:
            thread.join(self.close_timeout)


def agent_env(
    agent: Callable[[Endpoint, str], Any] | str,
    *,
    max_turns: int | None = None,
    on_history_rewrite: str = "fail",
    close_timeout: float = 5.0,
) -> Callable[[], AgentEnv]:
    """A picklable env factory running ``agent`` against an OpenAI-compatible endpoint, one per episode.

    Args:
        agent: ``agent(endpoint, task) -> reward`` (or a ``"module:function"`` string), defined at module level so
            that the env pool can run it in its worker processes.
        max_turns: model answers per episode (see :class:`AgentEnv`).
        on_history_rewrite: what a request that does not extend the conversation does: ``"fail"`` the episode,
            or ``"split"`` it: later turns are sampled from the request's messages (see :class:`AgentEnv`).
        close_timeout: seconds to wait for the agent when its episode ends.

    Returns:
        The factory, for ``rollout``, ``make_rollout_func`` or ``trl-env eval/train``.

    Example:
        >>> factory = agent_env("examples.agent_calculator:solve", max_turns=4)
        >>> factory().max_turns, factory().agent.__name__
        (4, 'solve')
    """
    from trl_env.adapters.seeds import resolve

    return functools.partial(
        AgentEnv,
        resolve(agent, "agent_env(agent=...)"),
        max_turns=max_turns,
        on_history_rewrite=on_history_rewrite,
        close_timeout=close_timeout,
    )
