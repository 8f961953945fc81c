"""A multi-turn env whose env breaks for some seeds, for the rollout-worker tests (a light module: env workers
are processes that import it, so it imports neither torch nor transformers)."""

from __future__ import annotations

import random


class FlakyCountdownEnv:
    """Lives for as many model turns as its seed says (``"3-x"``: three), rewarding each answer by its length
    (``len % 3 / 3``, summed), so episodes of one seed score differently. ``"fail:N-x"`` raises at its second
    step (after one good turn), ``"flaky:N-x"`` at each step with probability 1/3.

    Example:
        >>> env, delta = FlakyCountdownEnv().reset("fail:3-a")
        >>> env.step("ab")[0].alive, env.reward
        (True, 0.6666666666666666)
        >>> env.step("b")
        Traceback (most recent call last):
        ...
        ConnectionError: the env's backend went away at step 2
    """

    def __init__(self) -> None:
        self.reward, self.alive, self.left, self.turn = 0.0, True, 0, 0

    def reset(self, seed: str) -> tuple[FlakyCountdownEnv, str]:
        self.mode, _, plain = seed.rpartition(":")
        self.left = int(plain.split("-")[0])
        self.random = random.Random()
        return self, f"Seed {seed}. Say anything."

    def step(self, action: str) -> tuple[FlakyCountdownEnv, str]:
        if (self.mode == "fail" and self.turn == 1) or (self.mode == "flaky" and self.random.random() < 1 / 3):
            raise ConnectionError(f"the env's backend went away at step {self.turn + 1}")
        self.turn += 1
        self.left -= 1
        self.reward += (len(action) % 3) / 3
        self.alive = self.left > 0
        return self, f"turn {self.turn}"
