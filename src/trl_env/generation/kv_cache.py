"""Transformers generators that reuse keys and values instead of re-encoding contexts.

A multi-turn rollout asks its generator, turn after turn, to continue contexts that grow
by appending: turn ``t + 1``'s context is turn ``t``'s context, the sampled answer, and
the environment's reply. :class:`TransformersGenerator` re-encodes each whole context
every turn, so a turn's cost grows with the episode. Two savings, both exact (the same
keys and values the model would compute, so the same distribution and logprobs):

* :class:`PrefixCachingGenerator` encodes the batch's common prefix (system prompt,
  instructions: every episode of the first turn, every GRPO group) once, with batch 1.
* :class:`EpisodeCacheGenerator` also keeps each episode's keys and values from one call
  to the next, so a later turn feeds only the new tokens (the last sampled token and the
  environment's reply).

Example:
    >>> generator = EpisodeCacheGenerator(model, tokenizer, temperature=1.0)
    >>> first = generator.generate([[1, 2, 3, 4]], max_new_tokens=4)[0]
    >>> _ = generator.generate([[1, 2, 3, 4, *first.ids, 9, 9]], max_new_tokens=4)
    >>> generator.stats.reused_tokens  # the first call's context and sampled tokens (but the last) were not re-fed
    7
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import DynamicLayer

from trl_env.core import Generation
from trl_env.generation.transformers_generator import TransformersGenerator, _forward_kwargs


def common_prefix_length(contexts: Sequence[Sequence[int]]) -> int:
    """The number of leading tokens all ``contexts`` share.

    Example:
        >>> common_prefix_length([[1, 2, 3], [1, 2, 4], [1, 2]])
        2
    """
    first = contexts[0]
    length = min(len(c) for c in contexts)
    for other in contexts[1:]:
        length = next((i for i in range(length) if other[i] != first[i]), length)
    return length


def _extends(context: Sequence[int], key: tuple[int, ...]) -> bool:
    return len(key) <= len(context) and context[len(key) - 1] == key[-1] and tuple(context[: len(key)]) == key


def _shared_length(key: tuple[int, ...], context: Sequence[int]) -> int:
    """The number of leading tokens ``key`` and ``context`` share (slices compare in C: a binary search).

    Example:
        >>> _shared_length((1, 2, 3, 4), [1, 2, 9]), _shared_length((1, 2), [1, 2, 3]), _shared_length((5,), [1])
        (2, 2, 0)
    """
    if not key or not context or key[0] != context[0]:
        return 0
    if _extends(context, key):
        return len(key)
    low, high = 1, min(len(key), len(context))  # key[:low] == context[:low]; the answer is in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if key[:middle] == tuple(context[:middle]):
            low = middle
        else:
            high = middle - 1
    return low


def has_plain_cache(model: PreTrainedModel) -> bool:
    """Whether every layer of ``model``'s KV cache is plain full attention (no sliding window, no linear state).

    Only such caches can be cut, padded and put together again row by row; a sliding-window
    layer drops old keys, so a cached prefix would not line up with the attention mask.

    Example:
        >>> has_plain_cache(tiny_qwen3)
        True
    """
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)


def _positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids that count only real tokens (padding anywhere in a row is skipped)."""
    return (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)


class PrefixCachingGenerator(TransformersGenerator):
    """A :class:`TransformersGenerator` that encodes the batch's common prefix only once.

    Multi-turn contexts of one batch usually share a long opening (system prompt, the
    environment's instructions): every turn re-reads it for every episode. Here its keys and
    values are computed once with batch size 1 and repeated for every row; only the rest of
    each context (left-padded *after* the prefix; positions follow the attention mask) goes
    through the model. Sampling and logprobs are :class:`TransformersGenerator`'s. Without a
    shared prefix of ``min_prefix`` tokens, or for a model whose cache is not plain full
    attention (:func:`has_plain_cache`), it simply is a :class:`TransformersGenerator`.

    Example:
        >>> generator = PrefixCachingGenerator(model, tokenizer, temperature=1.0)
        >>> [len(g.ids) for g in generator.generate([[1, 2, 3, 4], [1, 2, 3, 5]], max_new_tokens=4)]
        [4, 4]
    """

    min_prefix = 8

    def _sample_loop(self, model: PreTrainedModel, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        prefix_len = min(common_prefix_length(contexts), min(len(c) for c in contexts) - 1)
        if len(contexts) < 2 or prefix_len < self.min_prefix or not has_plain_cache(model):
            return super()._sample_loop(model, contexts, max_new_tokens)
        device = next(model.parameters()).device
        forward_kwargs = _forward_kwargs(model)
        cache = DynamicCache(config=model.config)
        prefix = torch.tensor([contexts[0][:prefix_len]], dtype=torch.long, device=device)
        model(input_ids=prefix, use_cache=True, **{forward_kwargs["cache"]: cache}, **forward_kwargs["extra"])
        cache.batch_repeat_interleave(len(contexts))
        rest_ids, rest_mask = self._batch([c[prefix_len:] for c in contexts])
        attention_mask = torch.cat([torch.ones((len(contexts), prefix_len), dtype=torch.long), rest_mask], 1).to(device)
        positions = _positions(attention_mask)[:, prefix_len:]
        return self._decode(model, rest_ids.to(device), attention_mask, positions, cache, len(contexts), max_new_tokens)


@dataclass
class CacheStats:
    """What an :class:`EpisodeCacheGenerator` reused: context tokens not re-encoded, out of all.

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
class _Entry:
    layers: list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values of shape (heads, length, head_dim)
    last_used: int = 0  # the number of the call that stored it


class EpisodeCacheGenerator(PrefixCachingGenerator):
    """A :class:`PrefixCachingGenerator` that keeps each episode's keys and values between calls.

    After a call, the keys and values of every row (its context and all its sampled tokens
    but the last) are stored under those token ids. A later context that starts with a stored
    sequence reuses it and feeds the model only the rest; rows with and without a stored
    prefix share one batch (each row's cached part is left-padded to the longest, its new part
    left-padded after that). Results are what :class:`TransformersGenerator` would sample.

    The store is bounded by the episodes in flight: an entry that a call reuses is replaced by
    the longer one; an ended episode's entry is dropped when the engine says so
    (:meth:`end_episode`, the :class:`~trl_env.core.EpisodeMemory` capability); beyond
    ``max_entries`` the least recently used are dropped (an episode waiting for a slow env under
    the per-episode schedule misses calls, so age in calls alone would drop live episodes); and everything is
    dropped when the model's weights change (an optimizer step bumps the parameters' version
    counters; replacing a parameter's storage changes its address), so a cache never outlives
    the weights that computed it. ``clear()`` drops it by hand. Models whose cache is not
    plain full attention (sliding windows, linear attention) are sampled as by
    :class:`TransformersGenerator`, without any reuse.

    Example:
        >>> from trl_env import rollout
        >>> generator = EpisodeCacheGenerator(model, tokenizer, temperature=1.0, stop_token_ids=[151645])
        >>> _ = rollout(MyEnv, seeds, generator, processor, tokenizer=tokenizer, max_turns=4, max_turn_tokens=4)
        >>> generator.stats.reuse_rate > 0.5  # most context tokens were not re-encoded
        True
    """

    max_entries = 256

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stats = CacheStats()
        self._calls = 0
        self._entries: dict[tuple[int, ...], _Entry] = {}
        self._weights_version: int | None = None
        self._leaving: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] | None = None  # row -> layers, in a call

    def clear(self) -> None:
        """Drop every stored cache.

        Example:
            >>> cached = EpisodeCacheGenerator(model, tokenizer)
            >>> _ = cached.generate([[1, 2, 3]], max_new_tokens=2)
            >>> cached.clear(); len(cached)
            0
        """
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def end_episode(self, context: Sequence[int]) -> None:
        """Drop what is stored for an ended episode: every entry that ``context`` starts with.

        Example:
            >>> cached = EpisodeCacheGenerator(model, tokenizer)
            >>> first = cached.generate([[1, 2, 3]], max_new_tokens=2)[0]
            >>> cached.end_episode([1, 2, 3, *first.ids]); len(cached)
            0
        """
        context = tuple(context)
        for key in [key for key in self._entries if context[: len(key)] == key]:
            del self._entries[key]

    def _sample_loop(self, model: PreTrainedModel, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        if not has_plain_cache(model):
            return super()._sample_loop(model, contexts, max_new_tokens)
        self._drop_if_weights_changed(model)
        found = [self._longest_stored_prefix(context) for context in contexts]
        self.stats.context_tokens += sum(len(c) for c in contexts)
        self.stats.reused_tokens += sum(length for length, _ in found)
        self._leaving = leaving = {}
        try:
            if not any(length for length, _ in found):
                generations = super()._sample_loop(model, contexts, max_new_tokens)
            else:
                generations = self._continue(model, contexts, found, max_new_tokens)
        finally:
            self._leaving = None
        # an entry the context extends is superseded by this call's; one it only shares a prefix with may still
        # be another episode's (per-turn histories drop their own old ones: EpisodeSteps calls end_episode)
        superseded = {key for context, (_, key) in zip(contexts, found, strict=True) if key and _extends(context, key)}
        self._store(contexts, generations, superseded, leaving)
        return generations

    def _drop_if_weights_changed(self, model: PreTrainedModel) -> None:
        version = hash((id(model), *((p.data_ptr(), p._version) for p in model.parameters())))
        if version != self._weights_version:
            if self._entries:
                self.stats.invalidations += 1
            self._entries.clear()
            self._weights_version = version

    def _longest_stored_prefix(self, context: list[int]) -> tuple[int, tuple[int, ...] | None]:
        """(tokens reusable, stored key): at most ``len(context) - 1`` (one token must be fed).

        A stored context shares its keys and values up to the first token where it and ``context`` differ, so
        a prompt that rewrites the end of the history (a chat template dropping old thinking, a sliding window:
        ``history="template"``/``"window"``) still reuses what comes before.
        """
        best: tuple[int, tuple[int, ...] | None] = (0, None)
        for key in self._entries:
            shared = _shared_length(key, context)
            if shared > best[0]:
                best = (shared, key)
        return (min(best[0], len(context) - 1), best[1]) if best[1] is not None else best

    def _continue(
        self,
        model: PreTrainedModel,
        contexts: list[list[int]],
        found: list[tuple[int, tuple[int, ...] | None]],
        max_new_tokens: int,
    ) -> list[Generation]:
        device = next(model.parameters()).device
        cached = max(length for length, _ in found)
        new_ids, new_mask = self._batch([c[length:] for c, (length, _) in zip(contexts, found, strict=True)])
        cache_mask = torch.zeros((len(contexts), cached), dtype=torch.long)
        layers: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        for row, (length, key) in enumerate(found):
            if key is None:
                continue
            stored = self._entries[key].layers
            if layers is None:
                layers = [
                    (
                        k.new_zeros((len(contexts), k.shape[0], cached, k.shape[2])),
                        v.new_zeros((len(contexts), v.shape[0], cached, v.shape[2])),
                    )
                    for k, v in stored
                ]
            for (keys, values), (k, v) in zip(layers, stored, strict=True):
                keys[row, :, cached - length :] = k[:, :length]
                values[row, :, cached - length :] = v[:, :length]
            cache_mask[row, cached - length :] = 1
        cache = DynamicCache(config=model.config)
        for index, (keys, values) in enumerate(layers or []):
            cache.update(keys.to(device), values.to(device), index)
        attention_mask = torch.cat([cache_mask, new_mask], dim=1).to(device)
        positions = _positions(attention_mask)[:, cached:]
        return self._decode(model, new_ids.to(device), attention_mask, positions, cache, len(contexts), max_new_tokens)

    def _rows_leaving(
        self, cache: DynamicCache, attention_mask: torch.Tensor, batch_indices: torch.Tensor, rows: list[int]
    ) -> None:
        if self._leaving is None:
            return
        for place in batch_indices.tolist():
            real = attention_mask[place].bool()
            self._leaving[rows[place]] = [
                (layer.keys[place][:, real].clone(), layer.values[place][:, real].clone()) for layer in cache.layers
            ]

    def _store(
        self,
        contexts: list[list[int]],
        generations: list[Generation],
        reused: set[tuple[int, ...]],  # the entries this call's contexts extend: replaced by longer ones
        leaving: dict[int, list[tuple[torch.Tensor, torch.Tensor]]],
    ) -> None:
        """Replace the reused entries by this call's; beyond ``max_entries``, drop the least recently used."""
        self._calls += 1
        for key in reused:
            del self._entries[key]
        for row, layers in leaving.items():
            key = (*contexts[row], *generations[row].ids[:-1])
            if layers and layers[0][0].shape[1] == len(key):
                self._entries[key] = _Entry(layers, last_used=self._calls)
        if len(self._entries) > self.max_entries:
            by_age = sorted(self._entries, key=lambda key: self._entries[key].last_used)
            for key in by_age[: len(self._entries) - self.max_entries]:
                del self._entries[key]
