"""OpenEnv adapter: a trl-env environment that is a client of a running OpenEnv server.

Each env holds one WebSocket session (``<base_url>/ws``) through openenv-core's own
``GenericEnvClient``: ``reset(seed)`` sends the server's ``reset`` (with ``seed`` an integer,
:func:`~trl_env.adapters.seeds.seed_index` of the seed modulo 2**31, and ``episode_id`` the
seed string; the server passes on those its environment's ``reset`` accepts), ``step(action)``
sends the server's ``step`` with the action built from the text (``{action_key: text}`` by
default). The server's ``done`` ends the episode; the session is closed then, so that a
server with a session limit can serve the next episode.

A failure of the connection or the server (it died, timed out, or answered with an error)
raises :class:`OpenEnvError` naming the server, seed and step; the rollout engine turns that
into a failed episode.

Example (no server listens on ``port``; ``examples/adapters/openenv_example.py`` runs a real one):
    >>> import socket
    >>> with socket.socket() as probe:
    ...     probe.bind(("127.0.0.1", 0))
    ...     port = probe.getsockname()[1]
    >>> env = openenv_env(f"http://127.0.0.1:{port}", render="text", connect_timeout_s=2)()
    >>> env.reset("3")
    Traceback (most recent call last):
    ...
    trl_env.adapters.openenv.OpenEnvError: OpenEnv server http://127.0.0.1:...: reset (seed='3') failed: Connection...
    >>> env.alive
    False
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, Literal

from openenv.core import GenericEnvClient

from trl_env.adapters.actions import clean_text, valid_unicode
from trl_env.adapters.seeds import resolve, seed_index
from trl_env.errors import ConfigError, TrlEnvError

Render = Callable[[dict[str, Any]], str]


class OpenEnvError(TrlEnvError, RuntimeError):
    """The OpenEnv server could not be reached, died, timed out or answered with an error."""


def render_auto(observation: dict[str, Any]) -> str:
    """The observation's only string field if it has exactly one, else its fields as sorted JSON.

    Example:
        >>> render_auto({"text": "hi", "attempts": 2})
        'hi'
        >>> render_auto({"a": "x", "b": "y"})
        '{"a": "x", "b": "y"}'
    """
    texts = [value for value in observation.values() if isinstance(value, str)]
    if len(texts) == 1:
        return texts[0]
    return json.dumps(observation, sort_keys=True, ensure_ascii=False, default=str)


class OpenEnvEnv:
    """A session with an OpenEnv server.

    Reward: with ``reward_mode="sum"`` (default) the sum of the rewards the server returned
    in this episode (``None`` counts as 0), with ``"last"`` the latest one: use ``"last"`` for
    servers whose reward is already the episode's score so far. The episode ends when the
    server says ``done``, or after ``max_steps`` steps.

    Args:
        base_url: the server, e.g. ``"http://127.0.0.1:8000"`` (``ws://`` works too).
        render: how an observation (the server's fields, without reward/done/metadata) becomes
            text: ``"auto"`` (:func:`render_auto`), a field name, or a callable ``dict -> str``
            (or a ``"module:function"`` string naming one).
        action_key: the action field that receives the model's text (control characters removed and
            lone surrogates replaced first, see :func:`~trl_env.adapters.actions.clean_text`).
        action: instead of ``action_key``, a callable ``str -> dict`` (or ``"module:function"``)
            building the action's fields from the text.
        reward_mode: ``"sum"`` or ``"last"`` (see above).
        reset_kwargs: extra keyword arguments for the server's reset.
        max_steps: the most steps in an episode.
        connect_timeout_s: time to open the WebSocket.
        message_timeout_s: time to wait for each answer of the server.
        success_field: the observation field holding the server's own verdict (a bool): when the
            latest observation has it, ``metrics()`` reports it as ``success``; else there is no
            ``success`` metric. OpenEnv has no standard success signal and a reward is none (servers
            give partial credit), so the adapter never guesses one from the reward.
    """

    def __init__(
        self,
        base_url: str,
        *,
        render: str | Render = "auto",
        action_key: str = "message",
        action: str | Callable[[str], dict[str, Any]] | None = None,
        reward_mode: Literal["sum", "last"] = "sum",
        reset_kwargs: dict[str, Any] | None = None,
        max_steps: int = 50,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        success_field: str = "success",
    ) -> None:
        self.success_field, self.success = success_field, None
        self.base_url, self.action_key, self.reward_mode, self.max_steps = base_url, action_key, reward_mode, max_steps
        self.render_spec, self.reset_kwargs = render, dict(reset_kwargs or {})
        self._render = render_auto if render == "auto" else (resolve(render, "openenv_env render") if
                                                             callable(render) or ":" in render else None)  # fmt: skip
        self._action = resolve(action, "openenv_env action") if action is not None else None
        self.connect_timeout_s, self.message_timeout_s = connect_timeout_s, message_timeout_s
        self.reward, self.alive, self.steps, self.seed = 0.0, False, 0, ""
        self.server_reward: float | None = None
        self._client: Any = None

    def _text(self, observation: dict[str, Any]) -> str:
        # JSON carries lone surrogates as escapes; a tokenizer cannot encode them (an echoing server sends them back)
        if self._render is not None:
            return valid_unicode(str(self._render(observation)))
        if self.render_spec not in observation:
            raise OpenEnvError(f"openenv_env: the observation has no field {self.render_spec!r} "
                               f"(fields: {sorted(observation)}); pass render= one of them")  # fmt: skip
        return valid_unicode(str(observation[self.render_spec]))

    def _call(self, what: str, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            if self._client is None:
                client = GenericEnvClient(self.base_url, connect_timeout_s=self.connect_timeout_s,
                                          message_timeout_s=self.message_timeout_s)  # fmt: skip
                self._client = client.sync()
                self._client.connect()
            return getattr(self._client, method)(*args, **kwargs)
        except Exception as error:
            self.alive = False
            self.close()
            message = str(error) or "no message (the connection was probably closed)"
            raise OpenEnvError(f"OpenEnv server {self.base_url}: {what} (seed={self.seed!r}) failed: "
                               f"{type(error).__name__}: {message}") from error  # fmt: skip

    def _take(self, result: Any) -> str:
        verdict = (result.observation or {}).get(self.success_field)
        self.success = verdict if isinstance(verdict, bool) else None
        reward = result.reward
        self.server_reward = None if reward is None else float(reward)
        value = self.server_reward or 0.0
        self.reward = self.reward + value if self.reward_mode == "sum" else value
        if result.done or self.steps >= self.max_steps:
            self.alive = False
        try:
            text = self._text(result.observation or {})
        except BaseException:
            self.alive = False
            raise
        finally:
            if not self.alive:
                self.close()
        return text

    def reset(self, seed: str) -> tuple[OpenEnvEnv, str]:
        """Reset the server's environment with the seed; the rendered first observation."""
        self.seed, self.reward, self.steps, self.alive, self.success = seed, 0.0, 0, True, None
        kwargs = {**self.reset_kwargs, "seed": seed_index(seed) % 2**31, "episode_id": seed}
        return self, self._take(self._call("reset", "reset", **kwargs))

    def step(self, action: str) -> tuple[OpenEnvEnv, str]:
        """Send the action; the rendered observation the server answers with."""
        if not self.alive:
            return self, "The episode is over."
        self.steps += 1
        action = clean_text(action)  # no NUL or lone surrogate for a server that hands the text to C or UTF-8
        payload = self._action(action) if self._action is not None else {self.action_key: action}
        return self, self._take(self._call(f"step {self.steps}", "step", payload))

    def metrics(self) -> dict[str, float]:
        """``steps`` played, the server's ``last_reward`` (0.0 when it sent none), and ``success`` if it sent one."""
        figures = {"steps": float(self.steps), "last_reward": self.server_reward or 0.0}
        if self.success is not None:
            figures["success"] = float(self.success)
        return figures

    def close(self) -> None:
        """Close the WebSocket session (the server then frees it); the next reset opens a new one."""
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # the server may already be gone: nothing left to release then
                pass

    def __del__(self) -> None:
        self.close()


def openenv_env(
    base_url: str,
    *,
    render: str | Render = "auto",
    action_key: str = "message",
    action: str | Callable[[str], dict[str, Any]] | None = None,
    reward_mode: Literal["sum", "last"] = "sum",
    reset_kwargs: dict[str, Any] | None = None,
    max_steps: int = 50,
    connect_timeout_s: float = 10.0,
    message_timeout_s: float = 60.0,
    success_field: str = "success",
) -> Callable[[], OpenEnvEnv]:
    """A factory of :class:`OpenEnvEnv` (same arguments); no connection is made until ``reset``.

    Args:
        base_url, render, action_key, action, reward_mode, reset_kwargs, max_steps,
            connect_timeout_s, message_timeout_s, success_field: see :class:`OpenEnvEnv`.

    Returns:
        A picklable zero-argument callable returning a fresh env (picklable when ``render`` and
        ``action`` are module-level functions or ``"module:function"`` strings).

    Example:
        >>> openenv_env("localhost:8000")
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigError: openenv_env: base_url must start with http://, https://, ws:// or wss://, got ...
    """
    if not base_url.startswith(("http://", "https://", "ws://", "wss://")):
        raise ConfigError(f"openenv_env: base_url must start with http://, https://, ws:// or wss://, got {base_url!r}")
    if reward_mode not in ("sum", "last"):
        raise ConfigError(f"openenv_env: reward_mode must be 'sum' or 'last', got {reward_mode!r}")
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ConfigError(f"openenv_env: max_steps must be an integer >= 1, got {max_steps!r}")
    for name, spec in (("render", render), ("action", action)):
        if isinstance(spec, str) and ":" in spec:
            resolve(spec, f"openenv_env {name}")  # fail now on a bad "module:function"
    return functools.partial(
        OpenEnvEnv,
        base_url.rstrip("/"),
        render=render,
        action_key=action_key,
        action=action,
        reward_mode=reward_mode,
        reset_kwargs=reset_kwargs,
        max_steps=max_steps,
        connect_timeout_s=connect_timeout_s,
        message_timeout_s=message_timeout_s,
        success_field=success_field,
    )
