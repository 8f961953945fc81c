"""Deliberately broken environments for check-env tests."""

import random


class NonDeterministic:
    """Its first delta ignores the seed; it chokes on non-ASCII actions; it never ends."""

    def __init__(self):
        self.reward, self.alive = 0.0, True

    def reset(self, seed):
        return self, f"secret {random.random()}"

    def step(self, action):
        action.encode("ascii")
        return self, "again"


class WrongTypes:
    def __init__(self):
        self.reward, self.alive = 0.0, "yes"

    def reset(self, seed):
        return self, "hi"

    def step(self, action):
        return self, "hi"
