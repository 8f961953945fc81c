"""Turn-level credit assignment: per-token advantages for multi-turn GRPO.

One sample is one episode. The samples of a GRPO group (same prompt) are contiguous,
``num_generations`` per group, in TRL's batch order. Turn ``t`` of sample ``i`` has reward
``r[i][t]`` (the change of ``Env.reward`` that turn caused), its model tokens at
``turn_spans[i][t]`` (``[start, end)`` in the completion) and the anchor state key
``state_keys[i][t]`` it started from. Its discounted return is
``G[i][t] = sum_{k >= t} gamma**(k - t) * r[i][k]``.

Modes (every mode: env positions, padding and failed samples get exactly 0):

``"episode"``
    Plain GRPO, exactly TRL 1.16 (``scale_rewards="group"``): ``A_i = (R_i - mean_g) /
    (std_g + 1e-4)`` with the nan-aware mean and unbiased std over the group's scorable
    samples, on every model token.
``"turn"``
    Turn ``t``'s tokens get ``A[i][t] = (G[i][t] - b[i][t]) / (s_t + 1e-4)`` where, over
    ``S_t`` = the group's scorable samples that have a turn ``t``, ``b[i][t]`` is the mean of
    ``G[j][t]`` over ``j`` in ``S_t``, ``j != i`` (leave-one-out), and ``s_t`` the unbiased std of
    ``G[j][t]`` over all of ``S_t``; 0 when ``|S_t| < 2`` (a turn index only one sample reached has
    nothing to compare with, so with few generations late turns of long episodes get no signal).
    ``scale=False`` drops the division.
``"anchor"`` (GiGPO, arXiv:2505.10978)
    ``A[i][t] = A_i + w * (G[i][t] - mean{G[j][k] : j != i, state_keys[j][k] == state_keys[i][t]})``:
    the episode advantage above plus ``w`` times a step advantage among the group's turns that
    start from the same anchor state; 0 when no other sample reaches that state or the key is
    ``None``. Unscaled, as GiGPO's default ``mean_norm`` (a std over 2-3 turns is noise), so the
    step term is in reward units while the episode term is std-normalised: choose ``w`` with that
    in mind.
``"tree"`` (tree rollouts, :mod:`trl_env.trainer.tree_advantages`)
    The episode advantage ``A_i`` on the sample's own tokens (after its last branch point); a shared
    prefix's tokens get the mean ``A_i`` of the scorable samples through it, in exactly one of the
    samples that share it (0 in the other copies). Without branch points it is ``"episode"``.

Why per turn index, leave-one-out (verl issue 7244): normalising per-turn *rewards* per turn index
and summing them subtracts a baseline with one term per turn the sample itself took, so the
baseline depends on the sample's own stopping decision and the gradient is biased (a hidden bonus
for taking more turns). Here each turn's *return* is compared with other samples' returns at the
same turn index, so no sample's own actions enter its baseline; pooling all turns of the group
instead would compare early turns (long returns) with late ones (short returns) and penalise late
turns. The anchor baseline likewise leaves out every turn of the sample itself (a sample that
revisits a state would otherwise compare with its own future). Only the std scale of ``"turn"``
(as in GRPO) sees the sample's own return; ``scale=False`` gives the strictly unbiased estimator.

Failed (unscorable) samples, as TRL 1.16 does for rows whose reward functions all return None,
are left out of every mean, std and anchor group and get advantage 0.

Example:
    >>> group = [EpisodeCredit([1.0], [(0, 2)], ["s"], 3, episode_reward=1.0),
    ...          EpisodeCredit([0.0], [(0, 2)], ["s"], 2, episode_reward=0.0)]
    >>> compute_advantages(group, 2, "turn", scale=False).tolist()
    [[1.0, 1.0, 0.0], [-1.0, -1.0, 0.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch

from trl_env.errors import ConfigError, DataError
from trl_env.trainer.credit_checks import check_credit_samples
from trl_env.trainer.tree_advantages import tree_token_advantages

AdvantageMode = Literal["episode", "turn", "anchor", "tree"]
MODES: tuple[str, ...] = ("episode", "turn", "anchor", "tree")
EPSILON = 1e-4  # TRL 1.16's epsilon in (reward - mean) / (std + 1e-4)


@dataclass(frozen=True)
class EpisodeCredit:
    """What credit assignment needs of one episode (one sample).

    ``tree_nodes`` / ``tree_branch_points`` (mode ``"tree"`` only): the shared prefixes this sample passes
    through, root first, and the completion offset where each ends (see :mod:`trl_env.trainer.tree_advantages`).
    """

    turn_rewards: Sequence[float]
    turn_spans: Sequence[tuple[int, int]]
    state_keys: Sequence[str | None]
    completion_length: int
    episode_reward: float | None = None
    failed: bool = False
    tree_nodes: Sequence[str] = ()
    tree_branch_points: Sequence[int] = ()


def discounted_returns(rewards: Sequence[float], gamma: float = 1.0) -> list[float]:
    """``G[t] = sum_{k >= t} gamma**(k - t) * rewards[k]``.

    Example:
        >>> discounted_returns([1.0, 0.0, 2.0], gamma=0.5)
        [1.5, 1.0, 2.0]
    """
    returns, running = [0.0] * len(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = float(rewards[t]) + gamma * running
        returns[t] = running
    return returns


def group_normalized_rewards(rewards: torch.Tensor, num_generations: int, scale_rewards: str = "group") -> torch.Tensor:
    """TRL 1.16's GRPO advantages of a (B,) reward tensor; NaN rewards are unscorable and get 0.

    Line for line TRL's ``sum_then_normalize`` branch of ``_generate_and_score_completions``.

    Example:
        >>> group_normalized_rewards(torch.tensor([1.0, 0.0, float("nan"), 0.0]), 4).tolist()
        [1.1545..., -0.5772..., 0.0, -0.5772...]
    """
    mean = torch.nanmean(rewards.view(-1, num_generations), dim=1).repeat_interleave(num_generations, dim=0)
    if scale_rewards in ("group", "none"):
        if num_generations > 1:
            std = _nanstd(rewards.view(-1, num_generations), dim=1).repeat_interleave(num_generations, dim=0)
        else:
            std = torch.zeros_like(rewards)
    elif scale_rewards == "batch":
        std = _nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    else:
        raise ConfigError(f"scale_rewards must be 'group', 'batch' or 'none'; got {scale_rewards!r}")
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + EPSILON)
    return torch.nan_to_num(advantages, nan=0.0)


def _nanstd(tensor: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    # trl.trainer.utils.nanstd: unbiased std ignoring NaNs, NaN when fewer than two values
    mean = torch.nanmean(tensor, dim=dim, keepdim=True)
    variance = torch.nanmean((tensor - mean) ** 2, dim=dim, keepdim=True)
    count = torch.sum(~torch.isnan(tensor), dim=dim, keepdim=True)
    correction = torch.where(count > 1, count / (count - 1), torch.full_like(variance, float("nan")))
    variance = variance * correction
    if dim is None:
        return torch.sqrt(variance).squeeze()
    return torch.sqrt(variance.squeeze(dim))


def episode_advantages(samples: Sequence[EpisodeCredit], num_generations: int) -> torch.Tensor:
    """Per-sample (B,) GRPO advantages of the samples' ``episode_reward``; failed samples 0.

    Example:
        >>> episode_advantages([EpisodeCredit([], [], [], 0, 2.0), EpisodeCredit([], [], [], 0, 0.0)], 2).tolist()
        [0.7070..., -0.7070...]
    """
    rewards = []
    for index, sample in enumerate(samples):
        if sample.failed:
            rewards.append(float("nan"))
        elif sample.episode_reward is None or not math.isfinite(sample.episode_reward):
            raise DataError(f"sample {index}: episode_reward must be a finite number, got {sample.episode_reward!r}")
        else:
            rewards.append(float(sample.episode_reward))
    return group_normalized_rewards(torch.tensor(rewards, dtype=torch.float32), num_generations)


def turn_advantages(
    samples: Sequence[EpisodeCredit], num_generations: int, *, gamma: float = 1.0, scale: bool = True
) -> list[list[float]]:
    """Per-turn advantages of mode ``"turn"`` (leave-one-out baseline per turn index).

    Example:
        >>> group = [EpisodeCredit([1.0, 1.0], [(0, 1), (1, 2)], [None, None], 2),
        ...          EpisodeCredit([0.0], [(0, 1)], [None], 1)]
        >>> turn_advantages(group, 2, scale=False)
        [[2.0, 0.0], [-2.0]]
    """
    result: list[list[float]] = [[0.0] * len(s.turn_rewards) for s in samples]
    for members in _groups(samples, num_generations):
        returns = {i: discounted_returns(samples[i].turn_rewards, gamma) for i in members}
        for t in range(max((len(g) for g in returns.values()), default=0)):
            at_t = {i: g[t] for i, g in returns.items() if len(g) > t}
            if len(at_t) < 2:
                continue  # nobody to compare with: no signal at this turn index
            scale_t = _std(list(at_t.values())) + EPSILON if scale else 1.0
            for i, value in at_t.items():
                others = [v for j, v in at_t.items() if j != i]
                result[i][t] = (value - sum(others) / len(others)) / scale_t
    return result


def anchor_step_advantages(
    samples: Sequence[EpisodeCredit], num_generations: int, *, gamma: float = 1.0
) -> list[list[float]]:
    """Per-turn GiGPO step advantages: return minus the mean return of other samples' turns from the same anchor.

    Example:
        >>> group = [EpisodeCredit([1.0], [(0, 1)], ["s"], 1),
        ...          EpisodeCredit([0.0, 0.5], [(0, 1), (1, 2)], ["s", "u"], 2)]
        >>> anchor_step_advantages(group, 2)
        [[0.5], [-0.5, 0.0]]
    """
    result: list[list[float]] = [[0.0] * len(s.turn_rewards) for s in samples]
    for members in _groups(samples, num_generations):
        by_key: dict[str, list[tuple[int, float]]] = {}
        returns = {i: discounted_returns(samples[i].turn_rewards, gamma) for i in members}
        for i in members:
            for key, value in zip(samples[i].state_keys, returns[i], strict=True):
                if key is not None:
                    by_key.setdefault(key, []).append((i, value))
        for i in members:
            for t, key in enumerate(samples[i].state_keys):
                others = [v for j, v in by_key.get(key, []) if j != i] if key is not None else []
                if others:  # a singleton anchor (or one only this sample visits) carries no step signal
                    result[i][t] = returns[i][t] - sum(others) / len(others)
    return result


def compute_advantages(
    samples: Sequence[EpisodeCredit],
    num_generations: int,
    mode: AdvantageMode = "turn",
    *,
    gamma: float = 1.0,
    step_weight: float = 1.0,
    scale: bool = True,
    episode: torch.Tensor | None = None,
    width: int | None = None,
) -> torch.Tensor:
    """The (B, width) float32 per-token advantages of ``mode`` (see the module docstring).

    Args:
        samples: one :class:`EpisodeCredit` per sample, groups contiguous.
        num_generations: samples per group.
        mode: ``"episode"``, ``"turn"``, ``"anchor"`` or ``"tree"``.
        gamma: discount of the turn returns (``"turn"``, ``"anchor"``).
        step_weight: ``w``, the weight of the anchor step term.
        scale: divide ``"turn"`` advantages by the turn index's std.
        episode: (B,) episode advantages to use instead of those of ``episode_reward`` (a trainer passes
            TRL's own); failed samples must be 0 there. Modes ``"episode"``, ``"anchor"`` and ``"tree"``.
        width: number of columns; defaults to the longest ``completion_length``.

    Returns:
        A (B, width) float32 tensor, 0 outside the turn spans and on failed samples.

    Example:
        >>> group = [EpisodeCredit([1.0], [(1, 3)], ["s"], 4, 1.0), EpisodeCredit([0.0], [(0, 1)], ["s"], 1, 0.0)]
        >>> compute_advantages(group, 2, "episode").tolist()
        [[0.0, 0.7070..., 0.7070..., 0.0], [-0.7070..., 0.0, 0.0, 0.0]]
    """
    if mode not in MODES:
        raise ConfigError(f"mode must be one of {MODES}; got {mode!r}")
    width = check_credit_samples(samples, num_generations, width)
    if mode == "turn":
        per_turn = turn_advantages(samples, num_generations, gamma=gamma, scale=scale)
    else:
        if episode is None:
            episode = episode_advantages(samples, num_generations)
        elif tuple(episode.shape) != (len(samples),):
            raise DataError(f"episode advantages must have shape ({len(samples)},); got {tuple(episode.shape)}")
        if mode == "tree":
            return tree_token_advantages(samples, num_generations, episode, width)
        base = episode.detach().to("cpu", torch.float32)
        per_turn = [[float(base[i])] * len(s.turn_spans) for i, s in enumerate(samples)]
        if mode == "anchor":
            steps = anchor_step_advantages(samples, num_generations, gamma=gamma)
            per_turn = [[float(base[i] + step_weight * step) for step in steps[i]] for i in range(len(samples))]
    advantages = torch.zeros(len(samples), width, dtype=torch.float32)
    for i, sample in enumerate(samples):
        if sample.failed:
            continue
        for (start, end), value in zip(sample.turn_spans, per_turn[i], strict=True):
            advantages[i, start:end] = value
    return advantages


def _groups(samples: Sequence[EpisodeCredit], num_generations: int) -> list[list[int]]:
    """Indices of each group's scorable samples."""
    return [
        [i for i in range(start, start + num_generations) if not samples[i].failed]
        for start in range(0, len(samples), num_generations)
    ]


def _std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
