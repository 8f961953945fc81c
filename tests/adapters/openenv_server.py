"""A real OpenEnv server for the adapter tests: guess a digit, served by openenv-core's FastAPI app.

Run as ``python tests/adapters/openenv_server.py PORT``; it serves on 127.0.0.1 until killed.
"""

from __future__ import annotations

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


class GuessDigitEnvironment(Environment):
    """Guess the digit ``seed % 10`` in at most 4 tries; reward 1.0 for the right guess, else 0.0."""

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
        right = action.message.strip() == str(self.secret)
        text = "Right!" if right else f"No, not {action.message[:20]!r}."
        return GuessObservation(text=text, attempts=self.attempts, reward=float(right),
                                done=right or self.attempts >= 4)  # fmt: skip

    @property
    def state(self) -> State:
        return self._state


app = create_fastapi_app(GuessDigitEnvironment, GuessAction, GuessObservation, max_concurrent_envs=64)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
