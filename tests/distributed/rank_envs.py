"""Envs that behave differently on each process of a two-process run (a light module: env workers import it).

The rank comes from torchrun's ``RANK`` variable, which env worker processes inherit from their process.
"""

from __future__ import annotations

import os

TURNS = {0: 1, 1: 3}  # rank 0's episodes last one turn, rank 1's three
REWARD = {0: 1.0, 1: 2.0}  # so that the mean reward over both processes differs from either's
FAILING_ON_RANK1 = ("2", "6", "7")  # seeds whose env raises at its second step, on rank 1 only


def rank() -> int:
    """This process's rank (0 when not launched by torchrun or accelerate)."""
    return int(os.environ.get("RANK", "0"))


class RankedEnv:
    """One turn on rank 0, three on rank 1; raises at the second step on rank 1 for the failing seeds.

    Example:
        >>> env, first = RankedEnv().reset("3")
        >>> env, _ = env.step("anything")
        >>> env.alive, env.reward  # rank 0 (no RANK variable): one turn, reward 1
        (False, 1.0)
    """

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str) -> tuple[RankedEnv, str]:
        self.seed, self.rank = seed, rank()
        if os.environ.get("TRL_ENV_TEST_FAIL_ALL") == "1":
            raise RuntimeError(f"env for seed {seed} cannot start (every env fails, on rank {self.rank})")
        return self, f"Seed {seed}: say anything."

    def step(self, action: str) -> tuple[RankedEnv, str]:
        self.turn += 1
        if self.rank == 1 and self.turn == 2 and self.seed in FAILING_ON_RANK1:
            raise ConnectionError(f"rank 1's backend for seed {self.seed} went away")
        self.alive = self.turn < TURNS[self.rank]
        self.reward = REWARD[self.rank] if not self.alive else 0.0
        return self, "Go on." if self.alive else "Done."
