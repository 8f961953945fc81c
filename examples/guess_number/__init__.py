"""Guess-the-number: find a secret integer from "higher"/"lower" hints."""

from .env import GuessNumberEnv
from .seeds import heldout_seeds, train_seeds

__all__ = ["GuessNumberEnv", "heldout_seeds", "train_seeds"]
