"""Envs whose calls take a set time, for the pipelining benchmark (in their own module: env workers import it)."""

from __future__ import annotations

import random
import time

# name -> (probability, seconds) of one env call
PROFILES = {
    "instant": [(1.0, 0.0)],
    "heavy_tail": [(0.70, 0.02), (0.25, 0.3), (0.05, 3.0)],
    "one_second": [(1.0, 1.0)],
}


class SlowEnv:
    """Three turns; every reset and step sleeps a time drawn from ``profile``; reward from the answer's length."""

    def __init__(self, profile: str = "instant", turns: int = 3) -> None:
        self.profile, self.turns = PROFILES[profile], turns
        self.reward, self.alive = 0.0, True

    def _wait(self) -> None:
        draw, total = self.random.random(), 0.0
        for probability, seconds in self.profile:
            total += probability
            if draw <= total:
                time.sleep(seconds)
                return

    def reset(self, seed):
        self.random = random.Random(f"{seed}-{time.perf_counter_ns()}")
        self.turn, self.reward, self.alive = 0, 0.0, True
        self._wait()
        return self, f"Say something short ({seed})."

    def step(self, action):
        self._wait()
        self.turn += 1
        self.reward += 1.0 / (1 + len(action))
        self.alive = self.turn < self.turns
        return self, "Again." if self.alive else "Done."
