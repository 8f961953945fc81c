"""Batched sampling with a transformers model, returning the sampled tokens' logprobs.

Contexts are left-padded into one batch and sampled with ``model.generate``. The logprob of
each sampled token is ``log_softmax(logits / temperature)`` at that token: the quantity TRL
recomputes for the policy during training (top-p/top-k truncation is not folded in, as in
TRL's own generation path). A row stops at its first stop token, which is kept.

Example:
    >>> generator = TransformersGenerator(model, tokenizer, temperature=1.0)  # doctest: +SKIP
    >>> [g.ids for g in generator.generate([[1, 2, 3]], max_new_tokens=4)]  # doctest: +SKIP
    [[17, 5, 151645]]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from trl_env.generator import Generation


class TransformersGenerator:
    """A :class:`~trl_env.generator.Generator` over a transformers causal LM."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        stop_token_ids: Sequence[int] | None = None,
        model_context: Callable[[], AbstractContextManager[PreTrainedModel]] | None = None,
    ) -> None:
        if temperature <= 0:
            raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
        self.model = model
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.stop_token_ids = list(stop_token_ids) if stop_token_ids else [tokenizer.eos_token_id]
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.stop_token_ids[0]
        self._model_context = model_context or (lambda: nullcontext(self.model))

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """Sample up to ``max_new_tokens`` for each context, all in one batch.

        Example:
            >>> generator.generate([[151644, 872]], 2)[0].logprobs  # doctest: +SKIP
            [-11.9, -11.7]
        """
        if not contexts:
            return []
        with self._model_context() as model, torch.no_grad():
            was_training = model.training
            model.eval()
            try:
                return list(self._generate(model, contexts, max_new_tokens))
            finally:
                model.train(was_training)

    def _generate(self, model: PreTrainedModel, contexts: list[list[int]], max_new_tokens: int) -> Iterator[Generation]:
        device = next(model.parameters()).device
        width = max(len(c) for c in contexts)
        input_ids = torch.full((len(contexts), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(contexts), width), dtype=torch.long)
        for row, context in enumerate(contexts):
            input_ids[row, width - len(context) :] = torch.tensor(context, dtype=torch.long)
            attention_mask[row, width - len(context) :] = 1
        out = model.generate(
            input_ids=input_ids.to(device),
            attention_mask=attention_mask.to(device),
            do_sample=True,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=max_new_tokens,
            eos_token_id=self.stop_token_ids,
            pad_token_id=self.pad_token_id,
            output_logits=True,
            return_dict_in_generate=True,
            disable_compile=True,
        )
        new_ids = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float() / self.temperature  # (batch, new, vocab)
        logprobs = torch.log_softmax(logits, dim=-1).gather(-1, new_ids.unsqueeze(-1)).squeeze(-1)
        stops = set(self.stop_token_ids)
        for row in range(len(contexts)):
            ids = new_ids[row].tolist()
            end = next((i + 1 for i, token in enumerate(ids) if token in stops), len(ids))
            yield Generation(ids[:end], logprobs[row, :end].tolist())
