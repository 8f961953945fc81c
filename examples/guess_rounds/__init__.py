"""Guess rounds: several guess-the-number games in one long episode (a long-horizon task)."""

from .env import GuessRoundsEnv

__all__ = ["GuessRoundsEnv"]
