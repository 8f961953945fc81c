"""A generator that answers instantly with random tokens, for engine tests and overhead benchmarks."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence

from trl_env.core import Generation


class InstantGenerator:
    """Samples uniformly from ``token_ids``; ends a turn with ``stop_id`` with probability ``stop_prob`` per token.

    Example:
        >>> generator = InstantGenerator([5, 6, 7], stop_id=2, stop_prob=0.0, seed=0)
        >>> len(generator.generate([[1], [1]], 4)[1].ids)
        4
    """

    def __init__(self, token_ids: Sequence[int], *, stop_id: int, stop_prob: float = 0.2, seed: int = 0) -> None:
        self.token_ids = list(token_ids)
        self.stop_id = stop_id
        self.stop_prob = stop_prob
        self.random = random.Random(seed)
        self.calls: list[int] = []

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """Random continuations, one per context; records the batch size of each call."""
        self.calls.append(len(contexts))
        out = []
        for _ in contexts:
            ids: list[int] = []
            while len(ids) < max_new_tokens:
                if self.random.random() < self.stop_prob:
                    ids.append(self.stop_id)
                    break
                ids.append(self.random.choice(self.token_ids))
            out.append(Generation(ids, [-1.0] * len(ids)))
        return out


class ContextHashGenerator:
    """Answers each context with tokens drawn from a random stream seeded by the context itself.

    An episode's tokens then depend only on its own context, never on which other contexts share
    the call: what the scheduler tests compare across schedules.

    Example:
        >>> generator = ContextHashGenerator(range(100, 200), stop_id=2)
        >>> generator.generate([[1, 2]], 6) == generator.generate([[5], [1, 2]], 6)[1:]
        True
    """

    def __init__(self, token_ids: Sequence[int], *, stop_id: int, stop_prob: float = 0.2) -> None:
        self.token_ids = list(token_ids)
        self.stop_id = stop_id
        self.stop_prob = stop_prob
        self.calls: list[int] = []

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """One continuation per context, a function of that context alone."""
        self.calls.append(len(contexts))
        out = []
        for context in contexts:
            stream = random.Random(zlib.crc32(repr(list(context)).encode()))
            ids: list[int] = []
            while len(ids) < max_new_tokens:
                if stream.random() < self.stop_prob:
                    ids.append(self.stop_id)
                    break
                ids.append(stream.choice(self.token_ids))
            out.append(Generation(ids, [round(-stream.random(), 6) for _ in ids]))
        return out
