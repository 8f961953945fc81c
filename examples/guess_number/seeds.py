"""Seed lists for guess-the-number: a training stream and a disjoint held-out set.

Training seeds look like ``"train-<16 hex digits>"`` and held-out seeds like ``"eval-<i>"``;
the prefixes keep the two sets disjoint as strings, and neither parses as an integer, so the
environment hashes them into secrets. With only ``high - low + 1`` possible secrets the
*secrets* of the two sets necessarily overlap; what is held out is the seed, not the number.
"""

from __future__ import annotations

import random


def train_seeds(n: int, rng_seed: int = 0) -> list[str]:
    """``n`` distinct training seeds, reproducible from ``rng_seed``.

    Example:
        >>> train_seeds(2, rng_seed=0) == train_seeds(2, rng_seed=0)
        True
        >>> all(s.startswith("train-") for s in train_seeds(3, rng_seed=1))
        True
    """
    rng = random.Random(rng_seed)
    seeds: dict[str, None] = {}  # insertion-ordered set
    while len(seeds) < n:
        seeds[f"train-{rng.getrandbits(64):016x}"] = None
    return list(seeds)


def heldout_seeds(n: int) -> list[str]:
    """The first ``n`` held-out seeds, ``"eval-0"``, ``"eval-1"``, ... (a fixed, growing set).

    Example:
        >>> heldout_seeds(3)
        ['eval-0', 'eval-1', 'eval-2']
    """
    return [f"eval-{i}" for i in range(n)]
