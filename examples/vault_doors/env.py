"""Vault doors: a task where the first turn decides whether success is possible at all."""

from __future__ import annotations

import hashlib

from examples.guess_number.env import GuessNumberEnv, secret_for_seed


def door_for_seed(seed: str, doors: int) -> int:
    """The door (1..``doors``) that leads to the vault, from the seed (hashed apart from the code).

    Example:
        >>> door_for_seed("eval-0", 3) == door_for_seed("eval-0", 3), 1 <= door_for_seed("x", 3) <= 3
        (True, True)
    """
    digest = int.from_bytes(hashlib.sha256(f"door:{seed}".encode()).digest()[:8], "big")
    return 1 + digest % doors


def interleave_doors(seeds: list[str], doors: int) -> list[str]:
    """``seeds`` reordered so that consecutive seeds lead through doors 1, 2, ..., ``doors``, 1, 2, ... in turn.

    Taken in this order, ``doors`` secrets per training step present every door once: a policy that ignores the
    prompt's door then gains nothing on average from any one door, so a step's gradient cannot lean towards the
    doors its secrets happened to draw. Seeds beyond the rarest door's count are dropped (the rotation holds to
    the end); each door's seeds keep their order.

    Args:
        seeds: training seeds, in any order.
        doors: the env's number of doors.

    Returns:
        The seeds, rotating through the doors.

    Example:
        >>> order = interleave_doors([f"train-{i}" for i in range(30)], 3)
        >>> [door_for_seed(seed, 3) for seed in order[:6]], len(order) % 3
        ([1, 2, 3, 1, 2, 3], 0)
    """
    by_door: list[list[str]] = [[] for _ in range(doors)]
    for seed in seeds:
        by_door[door_for_seed(seed, doors) - 1].append(seed)
    rounds = min(len(door_seeds) for door_seeds in by_door)
    return [by_door[door][i] for i in range(rounds) for door in range(doors)]


class VaultDoorsEnv:
    """Pick the right door first, then crack the vault's code with higher/lower hints.

    The first answer picks a door: the prompt says which door the draught comes from, and only that door
    leads to the vault. A wrong door (or an answer that names no door) ends the episode with reward 0, so
    a wrong first turn makes the goal unreachable. Behind the right door, the remaining ``max_turns - 1``
    answers play guess-the-number over ``[low, high]`` (:class:`~examples.guess_number.GuessNumberEnv`,
    its reward and feedback). So the outcome depends on an early decision and on later play, which is
    what turn-level credit is meant to tell apart.

    ``reward`` picks the code game's reward (``"ratio"``, the default, or ``"info_gain"``:
    :mod:`examples.guess_number.rewards`). The door turn itself earns 0 either way: the prompt names
    the door, so picking it gains no information; its credit is the return of the turns it makes
    possible (a wrong door ends the episode at 0).

    Example:
        >>> env, prompt = VaultDoorsEnv().reset("eval-0")
        >>> door = env.door
        >>> env, delta = env.step(str(door))
        >>> delta.startswith(f"Door {door} opens"), env.alive, env.reward
        (True, True, 0.0)
        >>> env, delta = env.step(str(env.code.secret))
        >>> delta, env.alive, env.reward, env.metrics()["right_door"]
        ('Correct! The number is ...', False, 1.3, 1.0)
        >>> env, _ = env.reset("eval-0")
        >>> env, delta = env.step(str(door % 3 + 1))
        >>> env.alive, env.reward, env.metrics()["success"]
        (False, 0.0, 0.0)
    """

    def __init__(self, doors: int = 3, low: int = 1, high: int = 8, max_turns: int = 5, reward: str = "ratio") -> None:
        if doors < 2:
            raise ValueError(f"doors must be >= 2, got {doors}")
        if max_turns < 2:
            raise ValueError(f"max_turns must be >= 2 (a door, then at least one code), got {max_turns}")
        self.doors, self.low, self.high, self.max_turns = doors, low, high, max_turns
        self.code = GuessNumberEnv(low, high, max_turns - 1, reward=reward)
        self.door = 1
        self.reward: float = 0.0
        self.alive: bool = True
        self.chosen: int | None = None

    def metrics(self) -> dict[str, float]:
        """``success``, ``right_door`` and the code game's counters (read when the episode ends)."""
        in_vault = self.chosen == self.door
        return {
            "success": float(in_vault and self.code.solved),
            "right_door": float(in_vault),
            "answers": float(self.chosen is not None) + (self.code.turns if in_vault else 0.0),
        }

    def reset(self, seed: str) -> tuple[VaultDoorsEnv, str]:
        self.door = door_for_seed(seed, self.doors)
        self.code.reset(seed)
        self.code.secret = secret_for_seed(f"code:{seed}", self.low, self.high)
        self.reward, self.alive, self.chosen = 0.0, True, None
        prompt = (
            f"You stand before {self.doors} doors, numbered 1 to {self.doors}. A draught comes from door "
            f"{self.door}: only that door leads to the vault, every other door is a dead end. The vault opens "
            f"with a whole number between {self.low} and {self.high}; after each wrong try you hear whether "
            f"the number is higher or lower. You have {self.max_turns} answers in all: the first picks a door, "
            f"the others try numbers.\nAnswer with just a number, for example: 1"
        )
        return self, prompt

    def step(self, action: str) -> tuple[VaultDoorsEnv, str]:
        if not self.alive:
            return self, "The episode is over."
        if self.chosen is None:
            picked = GuessNumberEnv(1, self.doors)._parse(action)
            self.chosen = picked if picked is not None else 0
            if picked != self.door:
                self.alive = False
                what = f"Door {picked} is a dead end" if picked is not None else "You did not pick a door"
                return self, f"{what}: the vault cannot be reached any more."
            return self, f"Door {picked} opens onto the vault. Try a number between {self.low} and {self.high}."
        _, delta = self.code.step(action)
        self.alive, self.reward = self.code.alive, self.code.reward
        return self, delta
