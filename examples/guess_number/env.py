"""Guess-the-number environment: a shaped ratio reward or an additive information-gain reward."""

from __future__ import annotations

import hashlib
import re

from examples.guess_number.rewards import REWARDS, info_gain_reward, ratio_reward
from trl_env.errors import ConfigError

_INT = re.compile(r"(?:(?<![\w.])[-+])?[0-9]+")  # a sign counts only when it starts a token


def secret_for_seed(seed: str, low: int, high: int) -> int:
    """Map a seed string to a secret in ``[low, high]`` deterministically.

    A seed that is itself an integer in range (e.g. ``"7"``) *is* the secret, which makes
    hand-written tests and demos easy; any other string is hashed with SHA-256.

    Example:
        >>> secret_for_seed("7", 1, 16)
        7
        >>> secret_for_seed("train-abc", 1, 16) == secret_for_seed("train-abc", 1, 16)
        True
    """
    text = seed.strip()
    if re.fullmatch(r"[-+]?[0-9]+", text) and low <= int(text) <= high:
        return int(text)
    digest = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
    return low + digest % (high - low + 1)


class GuessNumberEnv:
    """Guess a secret integer in ``[low, high]`` within ``max_turns`` guesses.

    The secret comes from the seed (see :func:`secret_for_seed`). Each step reads the first
    integer in the action; the feedback is exactly ``"Higher than n."``, ``"Lower than n."`` or
    ``"Correct! The number is n."``. An action without an integer in range gets an
    ``"Invalid guess: ..."`` message and still uses up a turn; nothing the agent writes raises.
    Stepping a finished episode changes nothing and returns ``"The episode is over."``.

    Reward (``0.0`` before the first step), chosen by ``reward``
    (:mod:`examples.guess_number.rewards`)::

        "ratio" (default):  1.0 * solved + 0.1 * valid_guesses / turns + 0.2 * consistent_guesses / turns
        "info_gain":        1.0 * solved + log2(N / candidates) / log2(N)

    where a guess is *valid* if it is an integer in ``[low, high]`` and *consistent* if it is
    valid and still possible given all earlier feedback; ``N = high - low + 1`` and ``candidates``
    the secrets still possible. The ratio is recomputed each turn (maximum 1.3, e.g. a perfect
    binary search); the information gain is a sum of per-turn gains (each guess earns how much it
    shrinks the candidates, an inconsistent or invalid one 0; pinning the secret down earns 1 in
    all, solving 1 more), so its per-turn changes are per-turn credit. ``metrics()["success"]`` is
    the evaluation criterion under both. Values are rounded to 9 decimals.

    Example:
        >>> env, prompt = GuessNumberEnv().reset("11")
        >>> env, delta = env.step("8")
        >>> delta
        'Higher than 8.'
        >>> env, delta = env.step("My guess is 11")
        >>> delta, env.alive, env.reward
        ('Correct! The number is 11.', False, 1.3)
        >>> env, _ = GuessNumberEnv(reward="info_gain").reset("11")
        >>> env, _ = env.step("8")  # 16 -> 8 candidates: 1 of 4 bits
        >>> env.reward
        0.25
    """

    def __init__(self, low: int = 1, high: int = 16, max_turns: int = 5, reward: str = "ratio") -> None:
        if low > high:
            raise ValueError(f"low ({low}) must be <= high ({high})")
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        if reward not in REWARDS:
            raise ConfigError(f"GuessNumberEnv: reward must be one of {REWARDS}, got {reward!r}")
        self.low, self.high, self.max_turns, self.reward_kind = low, high, max_turns, reward
        self.secret = low
        self._clear()

    def _clear(self) -> None:
        self.reward: float = 0.0
        self.alive: bool = True
        self.solved = False
        self.turns = 0
        self.valid_guesses = 0
        self.consistent_guesses = 0
        self.possible_low, self.possible_high = self.low, self.high  # range still consistent with feedback

    def metrics(self) -> dict[str, float]:
        """Per-episode figures for evaluation (read when the episode ends): ``success`` and counters."""
        return {
            "success": float(self.solved),
            "answers": float(self.turns),
            "valid_guesses": float(self.valid_guesses),
            "consistent_guesses": float(self.consistent_guesses),
        }

    def reset(self, seed: str) -> tuple[GuessNumberEnv, str]:
        self._clear()
        self.secret = secret_for_seed(seed, self.low, self.high)
        prompt = (
            f"I am thinking of a whole number between {self.low} and {self.high} (inclusive). "
            f"You have {self.max_turns} guesses to find it. After each guess I will tell you whether "
            "the number is higher or lower than your guess.\n"
            f"Answer with just the number, for example: {(self.low + self.high) // 2}"
        )
        return self, prompt

    def step(self, action: str) -> tuple[GuessNumberEnv, str]:
        if not self.alive:
            return self, "The episode is over."
        self.turns += 1
        guess = self._parse(action)
        if guess is None:
            delta = f"Invalid guess: answer with one number between {self.low} and {self.high}."
        else:
            self.valid_guesses += 1
            if self.possible_low <= guess <= self.possible_high:
                self.consistent_guesses += 1
            if guess < self.secret:
                delta = f"Higher than {guess}."
                self.possible_low = max(self.possible_low, guess + 1)
            elif guess > self.secret:
                delta = f"Lower than {guess}."
                self.possible_high = min(self.possible_high, guess - 1)
            else:
                delta = f"Correct! The number is {guess}."
                self.solved = True
        self.alive = not self.solved and self.turns < self.max_turns
        self.reward = self._reward()
        return self, delta

    def candidates(self) -> int:
        """How many secrets are still consistent with the feedback so far (1 once solved)."""
        return 1 if self.solved else self.possible_high - self.possible_low + 1

    def _reward(self) -> float:
        if self.reward_kind == "info_gain":
            return info_gain_reward(self.solved, self.candidates(), self.high - self.low + 1)
        return ratio_reward(self.solved, self.valid_guesses, self.consistent_guesses, self.turns)

    def _parse(self, action: str) -> int | None:
        """The first integer in ``action`` if it lies in ``[low, high]``, else None."""
        match = _INT.search(action)
        if match is None:
            return None
        try:
            value = int(match.group())
        except ValueError:  # more digits than Python will convert
            return None
        return value if self.low <= value <= self.high else None
