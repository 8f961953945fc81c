"""Wordle with a small built-in word list."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence

from .words import WORDS


def score_guess(guess: str, secret: str) -> str:
    """Wordle marks for ``guess`` against ``secret`` (same length, any case), one per letter.

    ``G``: right letter, right spot. ``Y``: the letter is elsewhere in the secret. ``.``: absent,
    or every copy of it in the secret is already accounted for. Greens are assigned first, then
    yellows left to right, so a repeated letter is marked at most as often as it occurs.

    Example:
        >>> score_guess("EERIE", "ABIDE")
        '...YG'
    """
    guess, secret = guess.upper(), secret.upper()
    if len(guess) != len(secret):
        raise ValueError(f"guess {guess!r} and secret {secret!r} differ in length")
    marks = ["G" if g == s else "." for g, s in zip(guess, secret, strict=True)]
    unmatched = Counter(s for s, mark in zip(secret, marks, strict=True) if mark != "G")
    for i, letter in enumerate(guess):
        if marks[i] != "G" and unmatched[letter] > 0:
            marks[i] = "Y"
            unmatched[letter] -= 1
    return "".join(marks)


class WordleEnv:
    """Find a secret word in ``max_turns`` guesses from per-letter feedback.

    The secret is drawn from ``words`` (default: the built-in list of ~100 common words,
    filtered to ``word_length``): a seed that is itself a word of the list (any case) is the
    secret; any other seed is hashed with SHA-256 to pick one.

    A guess is the whole action (surrounding spaces, quotes, backticks, ``*`` and ``.!?``
    ignored) when that is ``word_length`` letters; otherwise the single distinct all-capitals
    word of that length in the action, if there is exactly one ("My guess: CRANE"). **Any**
    ``word_length`` letters are accepted, whether or not in the list. Anything else gets an
    ``"Invalid guess: ..."`` message and uses up a turn; nothing the agent writes raises.

    Feedback is ``"CRANE -> G . Y . ."`` (``G`` right spot, ``Y`` elsewhere in the word,
    ``.`` absent; see :func:`score_guess`), followed by a closing line when the episode ends.
    Reward: 0 unless solved; ``1 + 0.1 * (max_turns - turns) / max_turns`` when solved in
    ``turns`` guesses (so slightly more for fewer guesses, at most 1.1).

    Example:
        >>> env, prompt = WordleEnv().reset("crane")
        >>> env, delta = env.step("CRATE")
        >>> delta
        'CRATE -> G G G . G'
        >>> env, delta = env.step("crane")
        >>> env.alive, env.reward
        (False, 1.0666666667)
    """

    def __init__(self, word_length: int = 5, max_turns: int = 6, words: Sequence[str] | None = None) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        pool = WORDS if words is None else words
        self.words = tuple(sorted({w.upper() for w in pool if len(w) == word_length and w.isascii() and w.isalpha()}))
        if not self.words:
            raise ValueError(f"no words of length {word_length} in the word list")
        self.word_length, self.max_turns = word_length, max_turns
        self.secret = self.words[0]
        self._clear()

    def _clear(self) -> None:
        self.reward: float = 0.0
        self.alive: bool = True
        self.solved = False
        self.turns = 0
        self.history: list[tuple[str, str]] = []  # (guess, marks) for each valid guess

    def metrics(self) -> dict[str, float]:
        """Per-episode figures for evaluation (read when the episode ends): ``success`` and counters."""
        return {
            "success": float(self.solved),
            "turns": float(self.turns),
        }

    def reset(self, seed: str) -> tuple[WordleEnv, str]:
        self._clear()
        if seed.strip().upper() in self.words:
            self.secret = seed.strip().upper()
        else:
            digest = int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "big")
            self.secret = self.words[digest % len(self.words)]
        n = self.word_length
        prompt = (
            f"Let's play Wordle. Guess the secret {n}-letter English word in {self.max_turns} tries.\n"
            "After each guess you get one mark per letter: G = right letter in the right spot, "
            "Y = the letter is in the word but elsewhere, . = the letter is not in the word "
            "(a repeated letter is marked only as many times as it occurs in the word).\n"
            f"Answer with just one {n}-letter word, for example: {'CRANE' if n == 5 else 'A' * n}"
        )
        return self, prompt

    def step(self, action: str) -> tuple[WordleEnv, str]:
        if not self.alive:
            return self, "The episode is over."
        self.turns += 1
        guess = self._parse(action)
        if guess is None:
            delta = f"Invalid guess: answer with one {self.word_length}-letter word, e.g. CRANE."
        else:
            marks = score_guess(guess, self.secret)
            self.history.append((guess, marks))
            self.solved = guess == self.secret
            delta = f"{guess} -> {' '.join(marks)}"
        if self.solved:
            self.reward = round(1.0 + 0.1 * (self.max_turns - self.turns) / self.max_turns, 10)
            delta += f"\nSolved in {self.turns} {'guess' if self.turns == 1 else 'guesses'}!"
        elif self.turns >= self.max_turns:
            delta += f"\nOut of guesses. The word was {self.secret}."
        self.alive = not self.solved and self.turns < self.max_turns
        return self, delta

    def _parse(self, action: str) -> str | None:
        n = self.word_length
        whole = action.strip(" \t\r\n`'\"*.!?")
        if len(whole) == n and whole.isascii() and whole.isalpha():
            return whole.upper()
        capitals = set(re.findall(rf"\b[A-Z]{{{n}}}\b", action))
        return capitals.pop() if len(capitals) == 1 else None
