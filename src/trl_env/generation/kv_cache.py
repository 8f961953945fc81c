"""Transformers generators that reuse keys and values instead of re-encoding contexts.

A multi-turn rollout asks its generator, turn after turn, to continue contexts that grow
by appending: turn ``t + 1``'s context is turn ``t``'s context, the sampled answer, and
the environment's reply. :class:`TransformersGenerator` re-encodes each whole context
every turn, so a turn's cost grows with the episode. Two savings, both exact (the same
keys and values the model would compute, so the same distribution and logprobs):

* :class:`~trl_env.generation.prefix_caching.PrefixCachingGenerator` encodes the batch's common prefix (system prompt,
  instructions: every episode of the first turn, every GRPO group) once, with batch 1.
* :class:`EpisodeCacheGenerator` also keeps each episode's keys and values from one call
  to the next, so a later turn feeds only the new tokens (the last sampled token and the
  environment's reply). Its store of keys and values is
  :class:`~trl_env.generation.episode_cache_store.EpisodeCacheStore`.

Example:
    >>> generator = EpisodeCacheGenerator(model, tokenizer, temperature=1.0)
    >>> first = generator.generate([[1, 2, 3, 4]], max_new_tokens=4)[0]
    >>> _ = generator.generate([[1, 2, 3, 4, *first.ids, 9, 9]], max_new_tokens=4)
    >>> generator.stats.reused_tokens  # the first call's context and sampled tokens (but the last) were not re-fed
    7
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers import DynamicCache, PreTrainedModel

from trl_env.core import Generation
from trl_env.generation.episode_cache_store import CacheStats, EpisodeCacheStore, Layers, extends
from trl_env.generation.prefix_caching import PrefixCachingGenerator, has_plain_cache, real_token_positions


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
        self._store = EpisodeCacheStore()
        self._leaving: dict[int, Layers] | None = None  # row -> layers, in a call

    def clear(self) -> None:
        """Drop every stored cache.

        Example:
            >>> cached = EpisodeCacheGenerator(model, tokenizer)
            >>> _ = cached.generate([[1, 2, 3]], max_new_tokens=2)
            >>> cached.clear(); len(cached)
            0
        """
        self._store.clear()

    def __len__(self) -> int:
        return len(self._store)

    def end_episode(self, context: Sequence[int]) -> None:
        """Drop what is stored for an ended episode: every entry that ``context`` starts with.

        Example:
            >>> cached = EpisodeCacheGenerator(model, tokenizer)
            >>> first = cached.generate([[1, 2, 3]], max_new_tokens=2)[0]
            >>> cached.end_episode([1, 2, 3, *first.ids]); len(cached)
            0
        """
        self._store.end_episode(context)

    def _sample_loop(self, model: PreTrainedModel, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        if not has_plain_cache(model):
            return super()._sample_loop(model, contexts, max_new_tokens)
        if self._store.drop_if_weights_changed(model):
            self.stats.invalidations += 1
        found = [self._store.longest_prefix(context) for context in contexts]
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
        superseded = {key for context, (_, key) in zip(contexts, found, strict=True) if key and extends(context, key)}
        self._store.add(contexts, generations, superseded, leaving, max_entries=self.max_entries)
        return generations

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
        layers: Layers | None = None
        for row, (length, key) in enumerate(found):
            if key is None:
                continue
            stored = self._store.entries[key].layers
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
        positions = real_token_positions(attention_mask)[:, cached:]
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
