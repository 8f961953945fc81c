"""Helpers of the adapter tests."""

from __future__ import annotations

import math
import pickle
from collections.abc import Callable, Sequence


def assert_episodes_ok(episodes: list, seeds: Sequence[str], low: float, high: float) -> None:
    """Every episode ran without an env error, and its reward is finite and in [low, high]."""
    assert [e.seed for e in episodes] == list(seeds)
    for episode in episodes:
        assert episode.error is None, f"seed {episode.seed}: {episode.error}"
        assert math.isfinite(episode.reward) and low <= episode.reward <= high, (episode.seed, episode.reward)
        assert episode.num_turns >= 1


def round_trip(factory: Callable) -> Callable:
    """The factory after pickling, as a worker process would receive it."""
    return pickle.loads(pickle.dumps(factory))
