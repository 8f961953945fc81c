"""Wordle: find a secret five-letter word from per-letter feedback."""

from .env import WordleEnv, score_guess
from .words import WORDS

__all__ = ["WORDS", "WordleEnv", "score_guess"]
