"""Tree credit: samples that share a played prefix (forked envs), each shared token credited once.

In a tree rollout (:class:`~trl_env.engine.tree.TreeShape`) a root episode is played, forked at chosen
turns into branches, and every leaf path is one sample: its completion holds the whole path, so the
tokens of a shared prefix appear in every sample that passes through it. Sample ``i`` says which shared
prefixes (*nodes*) it passes through, root first, in ``tree_nodes[i]``, and where each ends (its branch
point, a completion-token offset) in ``tree_branch_points[i]``: node ``j`` covers
``[b[i][j-1], b[i][j])`` (with ``b[i][-1] = 0``) and the sample's own leaf tokens are
``[b[i][k-1], completion_length)``. A sample with no nodes is a plain episode.

Formula, per GRPO group (``num_generations`` contiguous samples, the leaves of one or more roots).
Let ``S`` be the group's scorable samples and ``A_i`` sample ``i``'s episode advantage: TRL's own
(:func:`~trl_env.trainer.advantages.group_normalized_rewards`), ``A_i = (R_i - mu) / (sigma + 1e-4)``
with ``mu`` the mean and ``sigma`` the unbiased std of the rewards ``R`` over ``S`` (``scale_rewards=
"group"``; ``"batch"``/``"none"`` change ``sigma`` only). For a node ``v`` let ``L(v)`` be the scorable
samples passing through it, in batch order. Then::

    A_v = mean(A_i for i in L(v)) = (mean(R_i for i in L(v)) - mu) / (sigma + 1e-4)    (0 if L(v) is empty)

(the two are equal because ``A`` is affine in ``R``: the node's advantage is the group-normalised
advantage of the mean reward of the leaves under it). Token ``p`` of sample ``i`` gets:

* 0 if ``i`` failed, or ``p`` is outside ``i``'s turn spans (env tokens, padding);
* ``A_v`` if ``p`` lies in node ``v`` and ``i = min L(v)`` (the node's *owner*), 0 in every other copy,
  so the prefix, sampled once, is credited once;
* ``A_i`` if ``p`` lies after ``i``'s last branch point (its own tokens).

With no nodes this is exactly mode ``"episode"``. A leaf path whose episode ended before a branch turn
is copied as it is (an empty leaf part): its tokens are one node credited once with its own reward.

Example:
    >>> from trl_env.trainer.advantages import EpisodeCredit
    >>> # one root, forked after 2 tokens into two branches with rewards 1 and 0 (A = +-0.7070)
    >>> leaves = [EpisodeCredit([r], [(0, 4)], [None], 4, r, tree_nodes=["r"], tree_branch_points=[2]) for r in (1, 0)]
    >>> tree_token_advantages(leaves, 2, torch.tensor([0.7070, -0.7070]), 4).tolist()
    [[0.0, 0.0, 0.7070..., 0.7070...], [0.0, 0.0, -0.7070..., -0.7070...]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from trl_env.errors import DataError

if TYPE_CHECKING:  # a type only: advantages.py imports this module
    from trl_env.trainer.advantages import EpisodeCredit

__all__ = ["tree_token_advantages", "validate_tree"]


def tree_token_advantages(
    samples: Sequence[EpisodeCredit], num_generations: int, episode: torch.Tensor, width: int
) -> torch.Tensor:
    """The (B, width) float32 tree advantages (formula in the module docstring).

    Args:
        samples: one credit per sample, groups contiguous, with ``tree_nodes`` and ``tree_branch_points``
            (turn spans already checked).
        num_generations: samples per group.
        episode: (B,) episode advantages ``A_i``; failed samples' entries are not read.
        width: number of columns.
    """
    owners = validate_tree(samples, num_generations)
    base = episode.detach().to("cpu", torch.float64)
    value = {node: float(base[members].mean()) for node, members in owners.items() if members}
    advantages = torch.zeros(len(samples), width, dtype=torch.float32)
    for i, sample in enumerate(samples):
        if sample.failed:
            continue
        row = torch.zeros(width, dtype=torch.float64)
        start = 0
        for node, end in zip(sample.tree_nodes, sample.tree_branch_points, strict=True):
            if owners[node] and owners[node][0] == i:  # the one copy of this prefix that carries its credit
                row[start:end] = value[node]
            start = end
        row[start:] = base[i]
        model = torch.zeros(width, dtype=torch.bool)
        for first, end in sample.turn_spans:
            model[first:end] = True
        advantages[i] = torch.where(model, row, 0.0).to(torch.float32)
    return advantages


def validate_tree(samples: Sequence[EpisodeCredit], num_generations: int) -> dict[str, list[int]]:
    """Check that the samples form trees within their groups; returns each node's scorable samples, in order.

    A node must have the same parent path and the same token range in every sample that passes through
    it, and all of them must be in one group. Failed samples' tree data is checked too (their copies of a
    prefix are real tokens), but they own nothing.

    Example:
        >>> from trl_env.trainer.advantages import EpisodeCredit
        >>> def leaf(node, point, failed=False):
        ...     return EpisodeCredit([], [], [], 4, 0.0, failed, tree_nodes=[node], tree_branch_points=[point])
        >>> validate_tree([leaf("r", 2), leaf("r", 2, failed=True), leaf("q", 3)], 3)
        {'r': [0], 'q': [2]}
        >>> validate_tree([leaf("r", 2), leaf("r", 3)], 2)
        Traceback (most recent call last):
        ...
        trl_env.errors.DataError: sample 1: tree node 'r' covers [0, 3) after [], but in sample 0 it covers [0, 2) ...
    """
    seen: dict[str, tuple[int, tuple[str, ...], int, int]] = {}  # node -> (first sample, parents, start, end)
    owners: dict[str, list[int]] = {}
    for i, sample in enumerate(samples):
        nodes, points = list(sample.tree_nodes), list(sample.tree_branch_points)
        if len(nodes) != len(points):
            raise DataError(
                f"sample {i}: tree_nodes and tree_branch_points differ in length ({len(nodes)}, {len(points)})"
            )
        if (
            any(isinstance(b, bool) or not isinstance(b, int) for b in points)
            or points != sorted(points)
            or any(not 0 <= b <= sample.completion_length for b in points)
        ):
            raise DataError(
                f"sample {i}: tree_branch_points must be ordered int offsets within the completion (length "
                f"{sample.completion_length}); got {points}"
            )
        for j, (node, end) in enumerate(zip(nodes, points, strict=True)):
            here = (i, tuple(nodes[:j]), points[j - 1] if j else 0, end)
            first = seen.setdefault(node, here)
            if first[1:] != here[1:]:
                raise DataError(
                    f"sample {i}: tree node {node!r} covers [{here[2]}, {end}) after {nodes[:j]}, but in sample "
                    f"{first[0]} it covers [{first[2]}, {first[3]}) after {list(first[1])}"
                )
            if first[0] // num_generations != i // num_generations:
                raise DataError(f"samples {first[0]} and {i} share tree node {node!r} but are in different groups")
            owners.setdefault(node, [])
            if not sample.failed:
                owners[node].append(i)
    return owners
