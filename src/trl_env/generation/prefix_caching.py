"""Encoding a batch's shared opening once: :class:`PrefixCachingGenerator` and the helpers every KV reuse needs.

A multi-turn batch's contexts usually start alike (system prompt, the environment's
instructions; every episode of a GRPO group). Their shared prefix's keys and values are the
same for every row, so they are computed once, with batch size 1, and repeated.
:class:`~trl_env.generation.kv_cache.EpisodeCacheGenerator` builds on this generator and on
:func:`has_plain_cache` and :func:`real_token_positions`.

Example:
    >>> common_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5]])
    3
"""

from __future__ import annotations

from collections.abc import Sequence

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


def has_plain_cache(model: PreTrainedModel) -> bool:
    """Whether every layer of ``model``'s KV cache is plain full attention (no sliding window, no linear state).

    Only such caches can be cut, padded and put together again row by row; a sliding-window
    layer drops old keys, so a cached prefix would not line up with the attention mask.

    Example:
        >>> has_plain_cache(tiny_qwen3)
        True
    """
    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)


def real_token_positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids that count only real tokens (padding anywhere in a row is skipped).

    Example:
        >>> real_token_positions(torch.tensor([[0, 1, 1, 0, 1]])).tolist()
        [[0, 0, 1, 0, 2]]
    """
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
        positions = real_token_positions(attention_mask)[:, prefix_len:]
        return self._decode(model, rest_ids.to(device), attention_mask, positions, cache, len(contexts), max_new_tokens)
