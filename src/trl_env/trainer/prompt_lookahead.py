"""The seeds of the generation batches TRL will ask for next, read from a twin of the trainer's dataloader.

The pipeline (:mod:`trl_env.trainer.pipeline`) plays these batches ahead of training. The twin has the trainer's
sampler and seed, so it yields the same generation batches in the same order; it is only read on the trainer's
thread (under several processes accelerate may synchronise at each epoch).

Example:
    >>> from itertools import islice
    >>> rows = [[{"prompt": "a"}], [{"prompt": "b"}], [{"prompt": "c"}]]   # one epoch; the twin repeats it
    >>> list(islice(PromptLookahead(lambda: iter(rows), every=2, to_seed=str), 3))
    [['a'], ['c'], ['b']]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["PromptLookahead"]


class PromptLookahead:
    """The seeds of the generation batches TRL will ask for next, from a twin of the trainer's dataloader.

    Args:
        batches: micro-batches in training order (lists of dataset rows), epoch after epoch.
        every: TRL generates at every ``every``-th micro-batch (``steps_per_generation * num_iterations``).
        to_seed: a row's prompt to its seed.
    """

    def __init__(self, batches: Callable[[], Iterator[list[Any]]], every: int, to_seed: Callable[[Any], str]) -> None:
        self._iterator = self._generation_batches(batches, every, to_seed)

    @staticmethod
    def _generation_batches(
        batches: Callable[[], Iterator[list[Any]]], every: int, to_seed: Callable[[Any], str]
    ) -> Iterator[list[str]]:
        micro = 0
        while True:
            empty = True
            for batch in batches():  # a new epoch of the twin, as the trainer starts one
                empty = False
                if micro % every == 0:
                    yield [to_seed(row["prompt"]) for row in batch]
                micro += 1
            if empty:
                return

    def __iter__(self) -> Iterator[list[str]]:
        return self._iterator

    def __next__(self) -> list[str]:
        return next(self._iterator)
