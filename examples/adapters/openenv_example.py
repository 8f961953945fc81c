"""OpenEnv through trl-env: a tiny OpenEnv server run in this process, played through the adapter.

``serve`` starts openenv-core's FastAPI app under uvicorn on 127.0.0.1 in a background thread
(a real server: the adapter talks to it over WebSocket like to any remote one). Training with
a server that is already running somewhere::

    factory = openenv_env("http://127.0.0.1:8000", render="text", action_key="message")
    rollout_func = make_rollout_func(factory, ...)

and from the command line::

    trl-env train --env trl_env.adapters.openenv:openenv_env \\
        --env-kwargs '{"base_url": "http://127.0.0.1:8000", "render": "text"}' ...

Example:
    >>> print("\\n".join(main()))
    env: Say the magic word (seed 5).
    model: please
    env: Wrong word.  (reward 0.0, alive True)
    model: abracadabra
    env: Right!  (reward 1.0, alive False)
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app

from trl_env.adapters.openenv import openenv_env


class WordAction(Action):
    """The player's word."""

    message: str


class WordObservation(Observation):
    """What the player sees."""

    text: str


class MagicWordEnvironment(Environment):
    """Say "abracadabra" within 3 tries: reward 1.0 and the end."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> WordObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        return WordObservation(text=f"Say the magic word (seed {seed}).", reward=0.0)

    def step(self, action: WordAction, timeout_s: float | None = None, **kwargs: Any) -> WordObservation:
        self._state.step_count += 1
        right = action.message.strip().lower() == "abracadabra"
        done = right or self._state.step_count >= 3
        return WordObservation(text="Right!" if right else "Wrong word.", reward=float(right), done=done)

    @property
    def state(self) -> State:
        return self._state


@contextmanager
def serve() -> Iterator[str]:
    """Run the MagicWord OpenEnv server on a free 127.0.0.1 port while the block runs; yield its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_fastapi_app(MagicWordEnvironment, WordAction, WordObservation, max_concurrent_envs=16)
    # "critical": openenv-core 0.3.0's server logs a harmless traceback each time a client closes its session
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def main(verbose: bool = False) -> list[str]:
    """Play one episode against the in-process server; return the transcript."""
    with serve() as url:
        env, delta = openenv_env(url, render="text")().reset("train-5")
        lines = [f"env: {delta}"]
        for word in ("please", "abracadabra"):
            env, delta = env.step(word)
            lines += [f"model: {word}", f"env: {delta}  (reward {env.reward}, alive {env.alive})"]
    if verbose:
        print("\n".join(lines))
    return lines


if __name__ == "__main__":
    main(verbose=True)
