"""Importance-sampling correction of samples drawn by an older policy, for any generator.

TRL 1.16 corrects the mismatch between its vLLM sampler and the trained model with a truncated or masked
importance ratio ``r = pi_old / pi_sampler`` (``vllm_importance_sampling_correction`` and ``_mode``,
``_clip_min``/``_clip_max``), but only on its own vLLM path. Pipelined rollouts (``max_staleness >= 1``) sample with
a policy up to that many steps old, whatever the generator, so :class:`~trl_env.trainer.turn_level_grpo.
TurnLevelGRPOTrainer` applies the same correction, with TRL's settings and modes, to every pipelined batch:

* ``pi_old``: the trainer's policy when the batch is scored (one extra forward pass, as TRL does for vLLM);
* ``pi_sampler``: the logprob of each sampled token, which trl-env keeps for every token;
* the ratio is computed per token (``token_*``) or per sequence (``sequence_*``, the sum of the log-differences
  over the sample's model tokens), then clamped (``*_truncate``) or zeroed outside its bounds (``*_mask``).

TRL multiplies the per-token loss by ``r``; every GRPO loss TRL offers except VESPO is linear in the advantage
with ``r >= 0`` (``-min(c1 A r, c2 A r) = -r min(c1 A, c2 A)``), so multiplying the (B, T) advantages by ``r``
is the same loss, and it reaches the loss through the one door a subclass has.

Example:
    >>> import torch
    >>> old = torch.tensor([[-1.0, -1.0]]); sampled = torch.tensor([[-2.0, -1.0]]); mask = torch.ones(1, 2)
    >>> ratio, clipped = importance_ratio(old, sampled, mask, mode="token_truncate", clip_min=None, clip_max=2.0)
    >>> [round(v, 3) for v in ratio[0].tolist()], round(clipped, 2)
    ([2.0, 1.0], 0.5)
"""

from __future__ import annotations

import math
from typing import Any

import torch

from trl_env.errors import ConfigError, InvariantError

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")


def importance_ratio(
    old_logps: torch.Tensor,
    sampling_logps: torch.Tensor,
    mask: torch.Tensor,
    *,
    mode: str,
    clip_min: float | None,
    clip_max: float | None,
) -> tuple[torch.Tensor, float]:
    """The truncated or masked importance ratio of TRL's modes, and the fraction of ratios it changed.

    Args:
        old_logps: (B, T) logprobs of the completion tokens under the policy being trained.
        sampling_logps: (B, T) logprobs under the policy that sampled them (NaN where unknown: ratio 1 there).
        mask: (B, T) 1 for the tokens the loss trains (model tokens).
        mode: one of ``token_truncate``, ``token_mask``, ``sequence_truncate``, ``sequence_mask``.
        clip_min: lower bound (None: none; the truncate modes then use 0).
        clip_max: upper bound (None: none).

    Returns:
        The ratio, (B, T) for token modes or (B, 1) for sequence modes, and the fraction of the ratios (over
        model tokens, or over sequences) that were clamped or masked.

    Raises:
        ConfigError: ``mode`` is not one of TRL's.
    """
    if mode not in MODES:
        raise ConfigError(f"vllm_importance_sampling_mode must be one of {MODES}; got {mode!r}")
    difference = torch.nan_to_num((old_logps - sampling_logps) * mask, nan=0.0)
    sequence = mode.startswith("sequence")
    log_ratio = difference.sum(dim=-1, keepdim=True) if sequence else difference
    ratio = torch.exp(log_ratio)
    low = clip_min if clip_min is not None else (0.0 if mode.endswith("truncate") else -math.inf)
    high = clip_max if clip_max is not None else math.inf
    outside = (ratio < low) | (ratio > high)
    if mode.endswith("truncate"):
        ratio = ratio.clamp(min=low, max=high)
    else:
        ratio = ratio.masked_fill(outside, 0.0)
    counted = torch.ones_like(outside, dtype=torch.bool) if sequence else mask.bool()
    total = int(counted.sum())
    fraction = float((outside & counted).sum()) / total if total else 0.0
    return ratio, fraction


def ratio_summary(ratio: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Min, mean and max of the ratios that count (model tokens, or every sequence).

    Example:
        >>> ratio_summary(torch.tensor([[0.5, 9.0]]), torch.tensor([[1.0, 0.0]]))
        {'min': 0.5, 'mean': 0.5, 'max': 0.5}
    """
    values = ratio.flatten() if ratio.shape[1] == 1 else ratio[mask.bool()]
    if values.numel() == 0:
        return {"min": 1.0, "mean": 1.0, "max": 1.0}
    return {"min": float(values.min()), "mean": float(values.mean()), "max": float(values.max())}


def corrected_advantages(advantages: torch.Tensor, ratio: torch.Tensor) -> torch.Tensor:
    """Advantages times the importance ratio: (B,) or (B, T) advantages, (B, T) or (B, 1) ratio.

    Example:
        >>> corrected_advantages(torch.tensor([1.0, -2.0]), torch.tensor([[0.5], [1.0]])).tolist()
        [[0.5], [-2.0]]
    """
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    return advantages * ratio.to(advantages.dtype)


def correct_off_policy(trainer: Any, output: dict[str, Any]) -> None:
    """Fold TRL's importance ratio into a scored batch's advantages, in place, and log its figures.

    Uses the trainer's ``vllm_importance_sampling_correction`` (off: nothing is changed, the ablation),
    ``vllm_importance_sampling_mode`` and its clip bounds. ``pi_old`` is the trainer's policy now (computed here
    when TRL did not, and kept as the batch's ``old_per_token_logps``).

    Args:
        trainer: a ``GRPOTrainer`` subclass, inside ``_generate_and_score_completions``.
        output: what TRL's ``_generate_and_score_completions`` returned.

    Raises:
        InvariantError: the batch has no sampling logprobs (the rollout function returns them for every token).
    """
    if not trainer.vllm_importance_sampling_correction:
        return
    sampling = output.get("sampling_per_token_logps")
    if sampling is None:
        raise InvariantError("a pipelined batch reached the trainer without its sampling logprobs")
    completion_ids, completion_mask = output["completion_ids"], output["completion_mask"]
    old = output.get("old_per_token_logps")
    if old is None:
        with torch.no_grad():
            old, _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model,
                torch.cat([output["prompt_ids"], completion_ids], dim=1),
                torch.cat([output["prompt_mask"], completion_mask], dim=1),
                completion_ids.size(1),
                batch_size=trainer.args.per_device_train_batch_size,
            )
        output["old_per_token_logps"] = old
    mask = completion_mask if output.get("tool_mask") is None else completion_mask * output["tool_mask"]
    ratio, clipped = importance_ratio(
        old,
        sampling,
        mask,
        mode=trainer.vllm_importance_sampling_mode,
        clip_min=trainer.vllm_importance_sampling_clip_min,
        clip_max=trainer.vllm_importance_sampling_clip_max,
    )
    output["advantages"] = corrected_advantages(output["advantages"], ratio)
    summary = ratio_summary(ratio, mask)
    figures = torch.tensor([summary["min"], summary["mean"], summary["max"], clipped], device=ratio.device)
    gathered = trainer.accelerator.gather(figures.unsqueeze(0)).reshape(-1, 4)
    metrics = trainer._metrics["train"]
    metrics["sampling/importance_sampling_ratio/min"].append(float(gathered[:, 0].min()))
    metrics["sampling/importance_sampling_ratio/mean"].append(float(gathered[:, 1].mean()))
    metrics["sampling/importance_sampling_ratio/max"].append(float(gathered[:, 2].max()))
    metrics["sampling/is_clipped_fraction"].append(float(gathered[:, 3].mean()))
