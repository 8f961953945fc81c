"""Consistency checks of the per-turn data the advantages are computed from (one concept: bad input, named).

Example:
    >>> from trl_env.trainer.advantages import EpisodeCredit
    >>> check_credit_samples([EpisodeCredit([1.0], [(0, 2)], ["s"], 2, 1.0)] * 3, 2, None)
    Traceback (most recent call last):
    ...
    trl_env.errors.DataError: 3 samples do not split into groups of num_generations=2
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trl_env.errors import DataError

if TYPE_CHECKING:
    from trl_env.trainer.advantages import EpisodeCredit


def check_credit_samples(samples: Sequence[EpisodeCredit], num_generations: int, width: int | None) -> int:
    """Check the samples' shapes before any advantage is computed; returns the tensor width.

    Args:
        samples: one :class:`~trl_env.trainer.advantages.EpisodeCredit` per sample, groups contiguous.
        num_generations: samples per group (must divide the number of samples).
        width: the advantages' number of columns, or None for the longest ``completion_length``.

    Returns:
        The width. Failed samples' turn data is not read (they get advantage 0 everywhere).

    Raises:
        ValueError: naming the sample (and turn) whose data is inconsistent.

    Example:
        >>> from trl_env.trainer.advantages import EpisodeCredit
        >>> check_credit_samples([EpisodeCredit([1.0], [(0, 2)], ["s"], 3, 1.0)], 1, None)
        3
        >>> check_credit_samples([EpisodeCredit([1.0], [(2, 1)], ["s"], 3, 1.0)], 1, None)
        Traceback (most recent call last):
        ...
        trl_env.errors.DataError: sample 0, turn 0: span [2, 1) must be ordered, non-overlapping ...
    """
    if num_generations < 1 or len(samples) % num_generations:
        raise DataError(f"{len(samples)} samples do not split into groups of num_generations={num_generations}")
    longest = max((s.completion_length for s in samples), default=0)
    width = longest if width is None else width
    if longest > width:
        raise DataError(f"a completion_length of {longest} does not fit width {width}")
    for index, s in enumerate(samples):
        if s.failed:
            continue
        if not (len(s.turn_rewards) == len(s.turn_spans) == len(s.state_keys)):
            raise DataError(
                f"sample {index}: turn_rewards, turn_spans and state_keys differ in length "
                f"({len(s.turn_rewards)}, {len(s.turn_spans)}, {len(s.state_keys)})"
            )
        if not all(math.isfinite(float(r)) for r in s.turn_rewards):
            raise DataError(f"sample {index}: turn_rewards must be finite; got {list(s.turn_rewards)}")
        previous_end = 0
        for t, (start, end) in enumerate(s.turn_spans):
            if not (previous_end <= start <= end <= s.completion_length):
                raise DataError(
                    f"sample {index}, turn {t}: span [{start}, {end}) must be ordered, non-overlapping and within "
                    f"the completion (length {s.completion_length}, previous turn ends at {previous_end})"
                )
            previous_end = end
    return width
