"""How a rollout uses its generator: the busy time it records, and the cost model of one call.

:class:`RolloutStats` is what ``RolloutEngine.stats`` reports after a run (wall time, time the generator was
busy, calls, batch sizes); :class:`CallCost` fits a call's duration as a fixed part plus a part per context,
from which the per-episode schedule sets its gathering window.

Example:
    >>> stats = RolloutStats("episode")
    >>> stats.busy(0.0, 1.0); stats.busy(0.5, 1.5); stats.close(wall_s=3.0)
    >>> stats.generate_s, stats.utilisation
    (1.5, 0.5)
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RolloutStats:
    """How a rollout used its generator.

    ``generate_s`` is the time at least one generation was running; ``utilisation`` its share of the wall
    time. ``contexts_per_call`` is the mean batch size the generator saw.

    Example:
        >>> stats = RolloutStats("turn", wall_s=2.0, generate_s=1.5, generate_calls=3, contexts=12)
        >>> stats.utilisation, stats.contexts_per_call
        (0.75, 4.0)
    """

    schedule: str
    wall_s: float = 0.0
    generate_s: float = 0.0
    generate_calls: int = 0
    contexts: int = 0
    sampled_tokens: int = 0  # model tokens kept, over all episodes (a tree's shared prefixes once)
    _intervals: list[tuple[float, float]] = field(default_factory=list, repr=False)

    @property
    def utilisation(self) -> float:
        return self.generate_s / self.wall_s if self.wall_s else 0.0

    @property
    def contexts_per_call(self) -> float:
        return self.contexts / self.generate_calls if self.generate_calls else 0.0

    def busy(self, start: float, end: float) -> None:
        """Record that the generator worked from ``start`` to ``end`` (overlaps count once)."""
        self._intervals.append((start, end))

    def close(self, wall_s: float) -> None:
        self.wall_s, total, reach = wall_s, 0.0, float("-inf")
        for start, end in sorted(self._intervals):
            if end > reach:
                total += end - max(start, reach)
                reach = end
        self.generate_s = total


class CallCost:
    """A generator call's duration as ``fixed + per_context * batch``, fitted to the recent calls.

    Example:
        >>> cost = CallCost()
        >>> for batch, seconds in [(32, 1.0), (8, 0.4), (16, 0.6)]:
        ...     cost.add(batch, seconds)
        >>> round(cost.fixed_s(), 2)
        0.2
        >>> CallCost().fixed_s()  # nothing measured yet
        0.0
    """

    def __init__(self, memory: int = 32) -> None:
        self.calls: list[tuple[int, float]] = []
        self.memory = memory

    def add(self, batch: int, seconds: float) -> None:
        self.calls = [*self.calls[1 - self.memory :], (batch, seconds)]

    def fixed_s(self) -> float:
        """The fitted fixed part (least squares); half the last call while all calls had one batch size."""
        if not self.calls:
            return 0.0
        sizes = [b for b, _ in self.calls]
        mean_b = sum(sizes) / len(sizes)
        mean_s = sum(s for _, s in self.calls) / len(self.calls)
        spread = sum((b - mean_b) ** 2 for b in sizes)
        if spread == 0:
            return self.calls[-1][1] / 2
        slope = sum((b - mean_b) * (s - mean_s) for b, s in self.calls) / spread
        return min(max(mean_s - max(slope, 0.0) * mean_b, 0.0), mean_s)
