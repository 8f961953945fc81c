"""Curriculum seed lists for the discrete-log environment: ``"d<level>-train-..."`` / ``"d<level>-eval-..."``.

The ``train``/``eval`` infixes keep the two sets disjoint as strings; at level 1 (13 primes)
the *problems* of the two sets still overlap, from level 2 up they rarely do.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def train_seeds(n: int, rng_seed: int = 0, levels: Sequence[int] = (1, 2, 3)) -> list[str]:
    """``n`` distinct training seeds, levels cycling through ``levels``, reproducible from ``rng_seed``.

    Example:
        >>> [s.split("-")[0] for s in train_seeds(4, levels=(1, 2))]
        ['d1', 'd2', 'd1', 'd2']
    """
    rng = random.Random(rng_seed)
    seeds: dict[str, None] = {}  # insertion-ordered set
    while len(seeds) < n:
        seeds[f"d{levels[len(seeds) % len(levels)]}-train-{rng.getrandbits(64):016x}"] = None
    return list(seeds)


def heldout_seeds(n: int, levels: Sequence[int] = (1, 2, 3)) -> list[str]:
    """The first ``n`` held-out seeds per level, grouped by level.

    Example:
        >>> heldout_seeds(2, levels=(1, 3))
        ['d1-eval-0', 'd1-eval-1', 'd3-eval-0', 'd3-eval-1']
    """
    return [f"d{level}-eval-{i}" for level in levels for i in range(n)]
