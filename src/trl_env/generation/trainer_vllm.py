"""Sampling through the vLLM engine of a TRL ``GRPOTrainer`` (``use_vllm=True``).

Each turn, the contexts of all live episodes go to TRL's ``VLLMGeneration.generate`` in one
call, with that turn's ``max_tokens``, the generator's stop ids (by default the trainer's EOS ids)
and the sampled token's logprob (see :func:`trl_env.trainer.trl_compat.vllm_generate_tokens`); the
trainer's other sampling settings (temperature, top-p, top-k, min-p, repetition penalty) are TRL's
own. TRL syncs the weights before calling the ``rollout_func``, so nothing is synced here.

The collective-call rule. In server mode (and colocate mode with tensor parallelism) TRL's
``generate`` is a collective call: every process gathers its prompts to the main process
and slices its share of the results by ``process_index * len(prompts)``. So:

* every process must call ``generate`` the same number of times per rollout, even one whose
  episodes have all ended: :meth:`TrainerVLLMGenerator.any_rank_live` (an all-reduce of a
  flag) keeps the engine's turn loop going on every process until no process has a live
  episode;
* every process must send the same number of prompts and the same ``max_tokens``: each
  call all-reduces (number of contexts, max_new_tokens) to their maxima, pads its contexts
  with a one-token dummy prompt (the first stop token) up to that number, and drops the
  dummy results. A process with no live episode thus sends only dummies, never an empty
  list (an empty list would break the slicing of the other processes' results).

In colocate mode without tensor parallelism each process has its own engine and nothing
is collective.

Example:
    >>> generator = TrainerVLLMGenerator(trainer, stop_token_ids=trainer.eos_token_ids)  # doctest: +SKIP
    >>> generator.generate([[151644, 872, 198]], max_new_tokens=8)[0].ids[-1]  # doctest: +SKIP
    151645
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trl_env.core import Generation
from trl_env.errors import ConfigError
from trl_env.trainer.trl_compat import vllm_generate_tokens, vllm_generation, vllm_is_collective


def max_over_processes(accelerator: Any, values: list[int]) -> list[int]:
    """The element-wise maximum of ``values`` over all processes (collective; identity on one process).

    Example:
        >>> from types import SimpleNamespace
        >>> max_over_processes(SimpleNamespace(num_processes=1), [3, 8])
        [3, 8]
    """
    if accelerator.num_processes <= 1:
        return list(values)
    import torch

    tensor = torch.tensor(values, dtype=torch.long, device=accelerator.device)
    return [int(v) for v in accelerator.reduce(tensor, reduction="max").tolist()]


class TrainerVLLMGenerator:
    """A :class:`~trl_env.core.Generator` over a ``GRPOTrainer``'s vLLM (colocate or server mode).

    ``stop_token_ids`` defaults to the trainer's ``eos_token_ids``. ``accelerator`` and ``handle`` default to
    the trainer's; tests pass stand-ins.
    """

    def __init__(
        self,
        trainer: Any,
        *,
        stop_token_ids: Sequence[int] | None = None,
        accelerator: Any | None = None,
        handle: Any | None = None,
    ) -> None:
        self.trainer = trainer
        self.accelerator = accelerator if accelerator is not None else trainer.accelerator
        self.handle = handle if handle is not None else vllm_generation(trainer)
        stops = trainer.eos_token_ids if stop_token_ids is None else stop_token_ids
        self.stop_token_ids = [int(t) for t in stops]
        if not self.stop_token_ids:
            raise ConfigError("TrainerVLLMGenerator needs stop token ids to end a turn at; the trainer has no EOS ids")
        self.collective = vllm_is_collective(self.handle) and self.accelerator.num_processes > 1
        self.calls = 0

    def any_rank_live(self, has_live: bool) -> bool:
        """Whether any process still has a live episode (collective when generation is).

        Example:
            >>> generator.any_rank_live(False)  # doctest: +SKIP
            True
        """
        if not self.collective:
            return has_live
        return max_over_processes(self.accelerator, [int(has_live)])[0] > 0

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """Sample up to ``max_new_tokens`` for each context in one call of TRL's vLLM generate.

        Example:
            >>> [len(g.ids) <= 8 for g in generator.generate([[151644, 872], [151644, 77091]], 8)]  # doctest: +SKIP
            [True, True]
        """
        count, max_tokens = len(contexts), max_new_tokens
        if self.collective:
            count, max_tokens = max_over_processes(self.accelerator, [count, max_new_tokens])
        if count == 0:
            return []
        dummy = [self.stop_token_ids[0]]
        prompts = [list(c) for c in contexts] + [dummy] * (count - len(contexts))
        self.calls += 1
        ids, logprobs = vllm_generate_tokens(
            self.handle, prompts, max_tokens=max(1, max_tokens), stop_token_ids=self.stop_token_ids
        )
        # vLLM ends each sequence at its first stop token: nothing to trim (the engine cuts the turn)
        return [Generation(i, lp) for i, lp in zip(ids[: len(contexts)], logprobs[: len(contexts)], strict=True)]
