"""Score only the tokens the loss trains: the LM head skips the prompt and the env's text.

A multi-turn episode's completion holds the model's sampled tokens (mask 1) and the env's text between them
(mask 0). TRL's loss multiplies every per-token term (policy ratio, KL, entropy bonus, importance ratio) by
``completion_mask * tool_mask``, so the log-probabilities of the env's tokens are computed and then thrown away.
They are not cheap: the LM head projects every scored position onto the whole vocabulary (49,152 columns for
SmolLM2), forward and backward. On CPU, TRL 1.16 also scores the *prompt*'s positions (its fused LM head compacts
to the labelled positions only on Triton devices; 1.15 compacts everywhere). With guess-the-number's 5 turns the
sampled tokens are about a tenth of the sequence, and the LM head was about 37 % of a training step on 2 CPU cores.

:class:`SampledTokenScoring` (mixed into trl-env's trainers) scores only the positions the loss reads:

* in the loss, ``completion_mask * tool_mask`` of the batch;
* when the batch is scored after generation (the reference model's and old policy's log-probabilities), the
  ``env_mask`` the rollout function returned, used only when the rows' tokens are the ones it was returned for;
* anywhere else, every completion position (TRL's own labels), compacted.

The positions it skips get log-probability and entropy 0, which every term of TRL's loss masks out; the positions
it scores get the same values as before (the same rows of the same matrix product). The saving is measured by
``benchmarks/sampled_token_scoring.py`` (docs/performance.md).

Example:
    >>> import torch
    >>> labels = torch.tensor([[-100, 5, 6, 7, 8]])
    >>> scored = torch.tensor([[True, False, True]])  # the last 3 positions are the completion
    >>> unscored_labels(labels, scored).tolist()
    [[-100, 5, 6, -100, 8]]
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from trl import GRPOTrainer

from trl_env.trainer.trl_compat import compact_fused_lm_head


def unscored_labels(labels: torch.Tensor, scored: torch.Tensor) -> torch.Tensor:
    """``labels`` with ``-100`` (TRL's "not scored") at the completion positions that ``scored`` leaves out.

    Args:
        labels: (B, P + C) next-token labels of prompt and completion, as TRL's fused LM head takes them.
        scored: (B, C) bool, True where the completion's log-probability is needed.

    Returns:
        A new tensor; the prompt's columns are unchanged.
    """
    width = scored.size(1)
    out = labels.clone()
    out[:, -width:] = out[:, -width:].masked_fill(~scored.to(out.device), -100)
    return out


def padded_masks(masks: list[list[int]], width: int, device: Any) -> torch.Tensor:
    """Per-row 0/1 masks right-padded with 1 (TRL pads ``env_mask`` that way) to ``width`` columns, as bool.

    Example:
        >>> padded_masks([[1, 0], [0]], 3, "cpu").tolist()
        [[True, False, True], [False, True, True]]
    """
    out = torch.ones(len(masks), width, dtype=torch.bool, device=device)
    for row, mask in enumerate(masks):
        out[row, : len(mask)] = torch.tensor(mask[:width], dtype=torch.bool, device=device)
    return out


def rows_match(completion_ids: torch.Tensor, rows: list[list[int]]) -> bool:
    """Whether each row of the (B, C) ``completion_ids`` starts with the tokens of ``rows``' entry.

    Example:
        >>> rows_match(torch.tensor([[3, 4, 0], [5, 0, 0]]), [[3, 4], [5]]), rows_match(torch.tensor([[3, 4]]), [[4]])
        (True, False)
    """
    if completion_ids.size(0) != len(rows):
        return False
    for row, ids in zip(completion_ids.tolist(), rows, strict=True):
        if len(ids) > len(row) or row[: len(ids)] != list(ids):
            return False
    return True


class SampledTokenScoring:
    """A ``GRPOTrainer`` mixin: log-probabilities only where the loss uses them (see the module docstring).

    Put it before ``GRPOTrainer`` in the bases. ``score_sampled_only = False`` (class or instance) turns it off.
    """

    score_sampled_only = True
    _loss_mask: torch.Tensor | None = None  # (B, C) bool while _compute_loss runs
    _rollout_rows: tuple[list[list[int]], list[list[int]]] | None = None  # the last generation's ids and env masks

    def _generate(self, prompts: list) -> tuple:
        result = super()._generate(prompts)  # type: ignore[misc]
        completion_ids, env_mask = result[1], result[2]  # TRL 1.15 and 1.16 return these at 1 and 2
        self._rollout_rows = (completion_ids, env_mask) if env_mask is not None else None
        return result

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        mask = inputs["completion_mask"] * inputs["tool_mask"] if "tool_mask" in inputs else inputs["completion_mask"]
        self._loss_mask = mask.bool()
        try:
            return super()._compute_loss(model, inputs)  # type: ignore[misc]
        finally:
            self._loss_mask = None

    def _scored_positions(self, input_ids: torch.Tensor, logits_to_keep: int) -> torch.Tensor | None:
        """The (B, C) positions to score in this call, or None for every completion position."""
        loss_mask = self._loss_mask
        if loss_mask is not None and loss_mask.shape == (input_ids.size(0), logits_to_keep):
            return loss_mask
        if self._rollout_rows is not None:
            ids, env_mask = self._rollout_rows
            if rows_match(input_ids[:, -logits_to_keep:], ids):
                return padded_masks(env_mask, logits_to_keep, input_ids.device)
        return None

    def _get_per_token_logps_and_entropies(
        self, model: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int, *args, **kwargs
    ) -> tuple:
        call = super()._get_per_token_logps_and_entropies  # type: ignore[misc]
        if not self.score_sampled_only:
            return call(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        scored = self._scored_positions(input_ids, logits_to_keep)
        with compact_fused_lm_head(), _labels_masked(model, scored):
            return call(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)


@contextmanager
def _labels_masked(model: Any, scored: torch.Tensor | None) -> Iterator[None]:
    """While open, ``model``'s calls with ``labels`` score only ``scored``'s positions, row chunk by row chunk.

    TRL calls the model once per chunk of rows (``batch_size``), in order, so the hook keeps a row offset.
    """
    if scored is None:
        yield
        return
    offset = 0

    def hook(module: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]] | None:
        nonlocal offset
        labels = kwargs.get("labels")
        if labels is None or not kwargs.get("fused_lm_head", False):
            return None
        rows = labels.size(0)
        kwargs["labels"] = unscored_labels(labels, scored[offset : offset + rows])
        offset += rows
        return args, kwargs

    handle = model.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


class SampledTokenGRPOTrainer(SampledTokenScoring, GRPOTrainer):
    """TRL's ``GRPOTrainer``, same arguments and results, scoring only the tokens its loss trains.

    A drop-in for ``GRPOTrainer(rollout_func=...)`` with a trl-env rollout function (or any ``env_mask``); trl-env's
    :class:`~trl_env.trainer.turn_level_grpo.TurnLevelGRPOTrainer` includes it too.
    """
