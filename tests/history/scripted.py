"""A generator that writes fixed texts, one per turn: the per-turn history tests' model."""

from __future__ import annotations

from trl_env.core import Generation


class TurnScript:
    """Writes ``texts[t]`` then the end-of-turn token at turn ``t`` (one call per turn: ``schedule="turn"``).

    Args:
        tokenizer: encodes the texts.
        texts: one answer per turn, cycled.
        end: the end-of-turn token.
    """

    def __init__(self, tokenizer, texts: list[str], end: str) -> None:
        self.ids = [
            tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids(end)] for text in texts
        ]
        self.calls = 0
        self.contexts: list[list[int]] = []

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        ids = self.ids[self.calls % len(self.ids)][:max_new_tokens]
        self.calls += 1
        self.contexts += [list(c) for c in contexts]
        return [Generation(list(ids), [-0.25 - 0.01 * i for i in range(len(ids))]) for _ in contexts]
