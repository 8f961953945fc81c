"""Guess rounds: guess-the-number played ``rounds`` times in one episode, a task longer than a small context."""

from __future__ import annotations

from examples.guess_number.env import GuessNumberEnv
from examples.guess_number.rewards import REWARDS
from trl_env.errors import ConfigError


class GuessRoundsEnv:
    """Play ``rounds`` games of guess-the-number in a row, each with its own secret and ``turns_per_round`` guesses.

    A round ends when its secret is found or its guesses are used up; the next round starts in the same
    episode (its first line says so), so an episode runs up to ``rounds * turns_per_round`` model turns. That
    is what makes it a long-horizon task: at the demo's budget of 128 completion tokens, one growing sequence
    (``history="full"``) holds about one round, while ``history="window"`` keeps every prompt bounded and plays
    every round (docs/history.md).

    Each round is a :class:`~examples.guess_number.GuessNumberEnv` (its feedback and its ``reward``: ``"ratio"``
    or ``"info_gain"``), the secret drawn from ``f"{seed}#round{i}"``. The episode's reward is the sum of the
    rounds' rewards divided by ``rounds`` (the rounds not reached count 0), so every round is worth the same.
    ``metrics()["success"]`` is the share of the rounds solved, ``first_round`` whether the first one was
    (the part an episode cut at one round can still do).

    Example:
        >>> env, prompt = GuessRoundsEnv(rounds=2, low=1, high=8, turns_per_round=3).reset("s")
        >>> prompt.startswith("Round 1 of 2.")
        True
        >>> env, delta = env.step(str(env.game.secret))
        >>> delta.split(" Round")[0], env.alive, env.reward
        ('Correct! The number is ...', True, 0.65)
        >>> for _ in range(3):
        ...     env, delta = env.step("0")
        >>> env.alive, env.metrics()["success"], env.metrics()["first_round"], env.metrics()["answers"]
        (False, 0.5, 1.0, 4.0)
    """

    def __init__(
        self, rounds: int = 4, low: int = 1, high: int = 8, turns_per_round: int = 4, reward: str = "ratio"
    ) -> None:
        if rounds < 1:
            raise ConfigError(f"GuessRoundsEnv: rounds must be >= 1, got {rounds}")
        if reward not in REWARDS:
            raise ConfigError(f"GuessRoundsEnv: reward must be one of {REWARDS}, got {reward!r}")
        self.rounds, self.turns_per_round = rounds, turns_per_round
        self.game = GuessNumberEnv(low, high, turns_per_round, reward=reward)
        self.seed, self.round, self.banked, self.solved_rounds, self.answers = "", 1, 0.0, 0, 0
        self.first_round_solved = False
        self.reward: float = 0.0
        self.alive: bool = True

    def metrics(self) -> dict[str, float]:
        """``success`` (share of rounds solved), ``first_round``, ``rounds_played`` and ``answers``."""
        return {
            "success": self.solved_rounds / self.rounds,
            "first_round": float(self.first_round_solved),
            "rounds_played": float(self.round - (self.game.turns == 0)),  # a round counts once it has a guess
            "answers": float(self.answers),
        }

    def reset(self, seed: str) -> tuple[GuessRoundsEnv, str]:
        self.seed, self.round, self.banked, self.solved_rounds, self.answers = seed, 1, 0.0, 0, 0
        self.first_round_solved, self.reward, self.alive = False, 0.0, True
        _, game_prompt = self.game.reset(f"{seed}#round1")
        return self, f"Round 1 of {self.rounds}. {game_prompt}"

    def step(self, action: str) -> tuple[GuessRoundsEnv, str]:
        if not self.alive:
            return self, "The episode is over."
        self.answers += 1
        _, delta = self.game.step(action)
        self.reward = round((self.banked + self.game.reward) / self.rounds, 9)
        if self.game.alive:
            return self, delta
        self.banked += self.game.reward
        if self.game.solved:
            self.solved_rounds += 1
            self.first_round_solved = self.first_round_solved or self.round == 1
        else:
            delta = f"{delta} Out of guesses: the number was {self.game.secret}."
        if self.round == self.rounds:
            self.alive = False
            return self, delta
        self.round += 1
        self.game.reset(f"{self.seed}#round{self.round}")
        return self, (
            f"{delta} Round {self.round} of {self.rounds}: a new number between {self.game.low} and "
            f"{self.game.high}, {self.turns_per_round} guesses."
        )
