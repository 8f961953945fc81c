"""The store behind :class:`~trl_env.generation.kv_cache.EpisodeCacheGenerator`: episodes' keys and values by token ids.

Each entry holds, per layer, the keys and values of one row of an earlier call: its context
and every sampled token but the last, stored under those token ids. A later context reuses
the entry it shares the longest prefix with. The store stays bounded by the episodes in flight
(reused entries are replaced by longer ones, ended episodes are dropped, beyond ``max_entries``
the least recently used go) and never outlives the weights that computed it.

Example:
    >>> store = EpisodeCacheStore()
    >>> layers = [(torch.zeros(2, 3, 4), torch.zeros(2, 3, 4))]  # one layer: 2 heads, 3 positions, head_dim 4
    >>> store.add([[1, 2]], [Generation([7, 8], [0.0, 0.0])], superseded=set(), leaving={0: layers}, max_entries=4)
    >>> store.longest_prefix([1, 2, 7, 9, 9])  # (1, 2, 7) are stored: all three are reused
    (3, (1, 2, 7))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from trl_env.core import Generation

# per layer: keys, values of shape (heads, length, head_dim)
Layers = list[tuple[torch.Tensor, torch.Tensor]]


@dataclass
class CacheStats:
    """What an :class:`~trl_env.generation.kv_cache.EpisodeCacheGenerator` reused: context tokens not re-encoded.

    Example:
        >>> CacheStats(reused_tokens=30, context_tokens=40).reuse_rate
        0.75
    """

    reused_tokens: int = 0
    context_tokens: int = 0
    invalidations: int = 0

    @property
    def reuse_rate(self) -> float:
        return self.reused_tokens / self.context_tokens if self.context_tokens else 0.0


@dataclass
class CacheEntry:
    """One stored row: its keys and values, and when it was stored."""

    layers: Layers
    last_used: int = 0  # the number of the call that stored it


def extends(context: Sequence[int], key: tuple[int, ...]) -> bool:
    """Whether ``context`` starts with all of ``key`` (the last token is compared first: the cheap refusal).

    Example:
        >>> extends([1, 2, 3], (1, 2)), extends([1, 2, 3], (1, 3)), extends([1], (1, 2))
        (True, False, False)
    """
    return len(key) <= len(context) and context[len(key) - 1] == key[-1] and tuple(context[: len(key)]) == key


def shared_length(key: tuple[int, ...], context: Sequence[int]) -> int:
    """The number of leading tokens ``key`` and ``context`` share (slices compare in C: a binary search).

    Example:
        >>> shared_length((1, 2, 3, 4), [1, 2, 9]), shared_length((1, 2), [1, 2, 3]), shared_length((5,), [1])
        (2, 2, 0)
    """
    if not key or not context or key[0] != context[0]:
        return 0
    if extends(context, key):
        return len(key)
    low, high = 1, min(len(key), len(context))  # key[:low] == context[:low]; the answer is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if key[:middle] == tuple(context[:middle]):
            low = middle
        else:
            high = middle - 1
    return low


class EpisodeCacheStore:
    """Rows' keys and values from earlier calls, by their token ids; bounded, and dropped when the weights change.

    Example:
        >>> store = EpisodeCacheStore()
        >>> store.add([[5, 6]], [Generation([1], [0.0])], set(), {0: [(torch.zeros(1, 2, 1),) * 2]}, max_entries=1)
        >>> len(store), store.longest_prefix([5, 6, 1])
        (1, (2, (5, 6)))
        >>> store.end_episode([5, 6, 1]); len(store)
        0
    """

    def __init__(self) -> None:
        self.entries: dict[tuple[int, ...], CacheEntry] = {}
        self._calls = 0
        self._weights_version: int | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def clear(self) -> None:
        """Drop every entry."""
        self.entries.clear()

    def end_episode(self, context: Sequence[int]) -> None:
        """Drop what is stored for an ended episode: every entry that ``context`` starts with."""
        context = tuple(context)
        for key in [key for key in self.entries if context[: len(key)] == key]:
            del self.entries[key]

    def drop_if_weights_changed(self, model: PreTrainedModel) -> bool:
        """Drop everything when ``model``'s weights changed since the last call; whether entries were dropped.

        An optimizer step bumps the parameters' version counters; replacing a parameter's storage changes its
        address: either way the stored keys and values are another model's.
        """
        version = hash((id(model), *((p.data_ptr(), p._version) for p in model.parameters())))
        if version == self._weights_version:
            return False
        dropped = bool(self.entries)
        self.entries.clear()
        self._weights_version = version
        return dropped

    def longest_prefix(self, context: list[int]) -> tuple[int, tuple[int, ...] | None]:
        """(tokens reusable, stored key): at most ``len(context) - 1`` (one token must be fed).

        A stored context shares its keys and values up to the first token where it and ``context`` differ, so
        a prompt that rewrites the end of the history (a chat template dropping old thinking, a sliding window:
        ``history="template"``/``"window"``) still reuses what comes before.
        """
        best: tuple[int, tuple[int, ...] | None] = (0, None)
        for key in self.entries:
            shared = shared_length(key, context)
            if shared > best[0]:
                best = (shared, key)
        return (min(best[0], len(context) - 1), best[1]) if best[1] is not None else best

    def add(
        self,
        contexts: list[list[int]],
        generations: list[Generation],
        superseded: set[tuple[int, ...]],  # the entries this call's contexts extend: replaced by longer ones
        leaving: dict[int, Layers],  # row -> its keys and values, taken as it left the decode loop
        max_entries: int,
    ) -> None:
        """Replace the superseded entries by this call's; beyond ``max_entries``, drop the least recently used."""
        self._calls += 1
        for key in superseded:
            del self.entries[key]
        for row, layers in leaving.items():
            key = (*contexts[row], *generations[row].ids[:-1])
            if layers and layers[0][0].shape[1] == len(key):
                self.entries[key] = CacheEntry(layers, last_used=self._calls)
        if len(self.entries) > max_entries:
            by_age = sorted(self.entries, key=lambda key: self.entries[key].last_used)
            for key in by_age[: len(self.entries) - max_entries]:
                del self.entries[key]
