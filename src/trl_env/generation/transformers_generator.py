"""Batched sampling with a transformers model, returning the sampled tokens' logprobs.

Contexts are left-padded into one batch and sampled token by token with a KV cache. The
logprob of each sampled token is ``log_softmax(logits / temperature)`` at that token: the
quantity TRL recomputes for the policy during training (top-p/top-k truncation is not folded
in, as in TRL's own generation path). A row stops at its first stop token, which is kept.

The sampling distribution is the one ``model.generate(do_sample=True, temperature=...,
top_k=..., top_p=...)`` samples from (temperature, then top-k, then top-p). The loop is
written out rather than calling ``model.generate`` for speed on large vocabularies: a token
is drawn by inverse-CDF sampling (:func:`sample_from_weights`, an order of magnitude faster
on CPU than ``torch.multinomial`` over 151k tokens), only the sampled tokens' logprobs are
kept instead of every step's full logits, and finished rows leave the batch. A generator given
``min_p`` or a ``repetition_penalty``, or a model whose ``generation_config`` asks for further
logits processing, is sampled with ``model.generate`` instead, so that processing still applies
(the logprobs stay ``log_softmax(logits / temperature)``, as TRL recomputes them).

Example:
    >>> generator = TransformersGenerator(model, tokenizer, temperature=1.0)
    >>> [len(g.ids) for g in generator.generate([[1, 2, 3], [4]], max_new_tokens=4)]  # a tiny random model
    [4, 4]
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from trl_env.core import Generation
from trl_env.errors import ConfigError
from trl_env.generation.base import cut_at_stop
from trl_env.generation.logits_processing import extra_logits_processing


class TransformersGenerator:
    """A :class:`~trl_env.core.Generator` over a transformers causal LM.

    ``top_k=None`` (or 0) and ``top_p=1.0`` turn those off; ``min_p`` and ``repetition_penalty`` (off: None,
    1.0) are applied by ``model.generate``. ``stop_token_ids`` defaults to the tokenizer's EOS; ``model_context``
    is a factory of a context manager yielding the model to sample with (e.g. TRL's unwrap).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        min_p: float | None = None,
        repetition_penalty: float = 1.0,
        stop_token_ids: Sequence[int] | None = None,
        model_context: Callable[[], AbstractContextManager[PreTrainedModel]] | None = None,
    ) -> None:
        if temperature <= 0:
            raise ConfigError(f"temperature must be > 0 for sampling, got {temperature}")
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.min_p = min_p
        self.repetition_penalty = repetition_penalty
        self.stop_token_ids = list(stop_token_ids) if stop_token_ids else [tokenizer.eos_token_id]
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_token_ids[0]
        self._model_context = model_context or (lambda: nullcontext(self.model))
        self._warpers: list[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = []
        if top_k:
            self._warpers.append(TopKLogitsWarper(top_k=top_k))
        if top_p < 1.0:
            self._warpers.append(TopPLogitsWarper(top_p=top_p))

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """Sample up to ``max_new_tokens`` for each context, all in one batch.

        Example:
            >>> logprobs = generator.generate([[151644, 872]], 2)[0].logprobs
            >>> len(logprobs), all(lp < 0 for lp in logprobs)
            (2, True)
        """
        if not contexts:
            return []
        if max_new_tokens < 1:
            return [Generation([], []) for _ in contexts]
        with self._model_context() as model, torch.no_grad():
            was_training = model.training
            model.eval()
            try:
                if self._own_processing() or extra_logits_processing(getattr(model, "generation_config", None)):
                    return list(self._generate_with_model_generate(model, contexts, max_new_tokens))
                return self._sample_loop(model, contexts, max_new_tokens)
            finally:
                model.train(was_training)

    def _own_processing(self) -> dict[str, float]:
        """This generator's settings that only ``model.generate`` applies (min-p, repetition penalty), if set."""
        settings = {} if self.min_p is None else {"min_p": self.min_p}
        if self.repetition_penalty != 1.0:
            settings["repetition_penalty"] = self.repetition_penalty
        return settings

    def _batch(self, contexts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            input_ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            attention_mask[row, width - len(context) :] = 1
        return input_ids, attention_mask

    def _sample(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Draw one token per row from ``logits`` (batch, vocab); return the tokens and their logprobs.

        ``torch.softmax`` serves both the draw and the logprob (the log of the sampled token's
        probability): one pass over the vocabulary, and unlike a plain ``exp`` it stays fast when
        most probabilities underflow to denormals (a peaked or low-temperature distribution).
        """
        scaled = logits.float() / self.temperature if self.temperature != 1.0 else logits.float()
        probs = torch.softmax(scaled, dim=-1)
        if self._warpers:
            filtered = scaled
            for warper in self._warpers:
                filtered = warper(None, filtered)  # the warpers ignore input_ids
            tokens = sample_from_weights(torch.softmax(filtered, dim=-1))
        else:
            tokens = sample_from_weights(probs)
        return tokens.squeeze(1), probs.gather(1, tokens).log_().squeeze(1)

    def _sample_loop(self, model: PreTrainedModel, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        device = next(model.parameters()).device
        input_ids, attention_mask = self._batch(contexts)
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        positions = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
        cache = DynamicCache(config=model.config)
        return self._decode(model, input_ids, attention_mask, positions, cache, len(contexts), max_new_tokens)

    def _decode(
        self,
        model: PreTrainedModel,
        step_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        step_positions: torch.Tensor,
        cache: DynamicCache,
        batch_size: int,
        max_new_tokens: int,
    ) -> list[Generation]:
        """Feed ``step_ids`` on top of ``cache``, then sample token by token; finished rows leave the batch."""
        device = step_ids.device
        forward_kwargs = _forward_kwargs(model)
        stops = torch.tensor(self.stop_token_ids, dtype=torch.long, device=device)
        rows = list(range(batch_size))  # live row -> context index
        sampled: list[list[int]] = [[] for _ in range(batch_size)]
        logprobs: list[list[float]] = [[] for _ in range(batch_size)]
        for step in range(max_new_tokens):
            out = model(
                input_ids=step_ids,
                attention_mask=attention_mask,
                position_ids=step_positions,
                use_cache=True,
                **{forward_kwargs["cache"]: cache},
                **forward_kwargs["extra"],
            )
            tokens, token_logprobs = self._sample(out.logits[:, -1, :])
            for row, token, logprob in zip(rows, tokens.tolist(), token_logprobs.tolist(), strict=True):
                sampled[row].append(token)
                logprobs[row].append(logprob)
            if step == max_new_tokens - 1:
                break
            live = ~torch.isin(tokens, stops)
            if not bool(live.all()):
                if not bool(live.any()):
                    break
                self._rows_leaving(cache, attention_mask, (~live).nonzero().squeeze(1), rows)
                keep = live.nonzero().squeeze(1)
                cache.batch_select_indices(keep)
                rows = [rows[i] for i in keep.tolist()]
                tokens, attention_mask, step_positions = tokens[keep], attention_mask[keep], step_positions[keep]
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=1)
            step_ids = tokens.unsqueeze(1)
            step_positions = step_positions[:, -1:] + 1
        self._rows_leaving(cache, attention_mask, torch.arange(len(rows), device=device), rows)
        return [Generation(ids, lps) for ids, lps in zip(sampled, logprobs, strict=True)]

    def _rows_leaving(
        self, cache: DynamicCache, attention_mask: torch.Tensor, batch_indices: torch.Tensor, rows: list[int]
    ) -> None:
        """Called by the decode loop for rows whose sampling is over, before they leave the batch.

        At that point ``cache`` holds, for each such row, its context and every sampled token
        but the last (``attention_mask`` marks the real positions). ``batch_indices`` are the rows'
        places in the current batch; ``rows`` maps every place to its context's index. Subclasses
        that keep caches between calls take them from here; this generator keeps nothing.
        """

    def _generate_with_model_generate(
        self, model: PreTrainedModel, contexts: list[list[int]], max_new_tokens: int
    ) -> Iterator[Generation]:
        device = next(model.parameters()).device
        input_ids, attention_mask = self._batch(contexts)
        width = input_ids.shape[1]
        out = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            do_sample=True,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            **self._own_processing(),  # only when set: otherwise the model's generation_config decides, as before
            max_new_tokens=max_new_tokens,
            eos_token_id=self.stop_token_ids,
            pad_token_id=self.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
            disable_compile=True,
        )
        new_ids = out.sequences[:, width:]
        # one step at a time: only the sampled token's logprob is kept, never a (batch, steps, vocab) tensor
        columns = [
            torch.log_softmax(step.float() / self.temperature, dim=-1).gather(-1, new_ids[:, i : i + 1])
            for i, step in enumerate(out.logits)
        ]
        logprobs = torch.cat(columns, dim=1).tolist()
        for row in range(len(contexts)):  # model.generate pads a finished row: drop what follows its stop token
            yield cut_at_stop(new_ids[row].tolist(), logprobs[row], self.stop_token_ids)


def _forward_kwargs(model: PreTrainedModel) -> dict:
    """How to pass the KV cache to ``model``'s forward, and whether it can keep only the last logits."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # PEFT passes kwargs through
    parameters = inspect.signature(base.forward).parameters
    cache = "cache" if "cache" in parameters else "past_key_values"
    extra = {"logits_to_keep": 1} if "logits_to_keep" in parameters else {}
    return {"cache": cache, "extra": extra}


_BLOCK = 1024


def sample_from_weights(weights: torch.Tensor) -> torch.Tensor:
    """One index per row of ``weights`` (batch, n; non-negative, unnormalised), drawn with probability ``w / sum(w)``.

    Inverse-CDF sampling in two levels: a block of ``_BLOCK`` entries is drawn from the block
    sums, then an entry within the block. It needs one sum over the row and a cumulative sum
    over one block, instead of a cumulative sum over the whole row, and no random number per
    entry (``torch.multinomial`` draws one per entry on CPU). Returns a (batch, 1) tensor.

    Example:
        >>> sample_from_weights(torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 2.0]])).tolist()
        [[1], [2]]
    """
    rows, n = weights.shape
    full = n // _BLOCK
    parts = [weights[:, : full * _BLOCK].reshape(rows, full, _BLOCK).sum(-1)] if full else []
    if n > full * _BLOCK:
        parts.append(weights[:, full * _BLOCK :].sum(-1, keepdim=True))
    block_sums = torch.cat(parts, dim=1)
    block_cdf = block_sums.cumsum(-1)
    draw = torch.rand(rows, 1, device=weights.device, dtype=block_cdf.dtype) * block_cdf[:, -1:]
    block = torch.searchsorted(block_cdf, draw, right=True).clamp_(max=block_sums.shape[1] - 1)
    empty = block_sums.gather(1, block) <= 0  # only through rounding at the very end of the row
    block = torch.where(empty, block_sums.argmax(-1, keepdim=True), block)
    within = draw - (block_cdf.gather(1, block) - block_sums.gather(1, block))
    index = block * _BLOCK + torch.arange(_BLOCK, device=weights.device)
    values = weights.gather(1, index.clamp(max=n - 1)) * (index < n)
    offset = torch.searchsorted(values.cumsum(-1), within, right=True).clamp_(max=_BLOCK - 1)
    zero = values.gather(1, offset) <= 0  # rounding again: never return an entry of weight 0
    offset = torch.where(zero, values.argmax(-1, keepdim=True), offset)
    return block * _BLOCK + offset
