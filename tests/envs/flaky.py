"""Deliberately broken environments for check-env tests."""

import functools
import random
import time

from tests.envs.basic import Counting


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


class ResetReturnsNone:
    """Forgets to return ``(self, delta)`` from ``reset``."""

    def __init__(self):
        self.reward, self.alive = 0.0, True

    def reset(self, seed):
        self.seed = seed

    def step(self, action):
        return self, "hi"


class HangsAtReset:
    """Every ``reset`` blocks (a dead server); the sleep ends long after any test."""

    def __init__(self):
        self.reward, self.alive = 0.0, True

    def reset(self, seed):
        time.sleep(600)
        return self, "hi"

    def step(self, action):
        return self, "hi"


class HangsAtStep(HangsAtReset):
    """Resets fine; every ``step`` blocks."""

    def reset(self, seed):
        return self, "go"

    def step(self, action):
        time.sleep(600)
        return self, "hi"


class _MakeCounting:
    """A callable object as a factory: ``make_counting(turns=2)`` makes an env."""

    def __call__(self, turns=3):
        return Counting(turns)


make_counting = _MakeCounting()
counting_two = functools.partial(Counting, turns=2)
