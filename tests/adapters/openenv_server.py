"""A real OpenEnv server for the adapter tests: guess a digit, served by openenv-core's FastAPI app.

Run as ``python tests/adapters/openenv_server.py PORT``; it serves on 127.0.0.1 until killed.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import uvicorn
from openenv.core.env_server import Action, Environment, Observation, State, create_fastapi_app


class GuessAction(Action):
    """The player's text."""

    message: str


class GuessObservation(Observation):
    """What the player sees."""

    text: str
    attempts: int = 0
    success: bool = False  # the server's own verdict: the digit was guessed


class GuessDigitEnvironment(Environment):
    """Guess the digit ``seed % 10`` in at most 4 tries.

    Reward per step: 1.0 for the right guess (which ends the episode), 0.25 for one off by
    one, else 0.0. In an episode whose id starts with ``crash`` the whole server process exits
    at the second step (a server dying mid-episode); in one whose id starts with ``echo`` the
    server answers ``You said: <the message>`` (a chat server repeating the player's text).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self.secret, self.attempts = 0, 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> GuessObservation:
        self._state = State(episode_id=episode_id, step_count=0)
        self.secret, self.attempts = (seed or 0) % 10, 0
        return GuessObservation(text=f"Guess my digit (episode {episode_id}).", reward=0.0, done=False)

    def step(self, action: GuessAction, timeout_s: float | None = None, **kwargs: Any) -> GuessObservation:
        self._state.step_count += 1
        self.attempts += 1
        if str(self._state.episode_id).startswith("crash") and self.attempts == 2:
            os._exit(1)
        if str(self._state.episode_id).startswith("echo"):
            return GuessObservation(text=f"You said: {action.message}", attempts=self.attempts, reward=0.0)
        guess = action.message.strip()
        right = guess == str(self.secret)
        close = guess.isdigit() and abs(int(guess) - self.secret) == 1
        text = "Right!" if right else f"No, not {action.message[:20]!r}."
        return GuessObservation(text=text, attempts=self.attempts, reward=1.0 if right else 0.25 if close else 0.0,
                                done=right or self.attempts >= 4, success=right)  # fmt: skip

    @property
    def state(self) -> State:
        return self._state


app = create_fastapi_app(GuessDigitEnvironment, GuessAction, GuessObservation, max_concurrent_envs=64)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
