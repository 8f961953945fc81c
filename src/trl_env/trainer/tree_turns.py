"""Tree rollouts under per-turn histories: which turn samples are copies of a shared turn.

In a tree rollout under ``history="template"``/``"window"`` every leaf's episode holds the turn samples of its
whole path (:meth:`~trl_env.engine.live_episode.LiveEpisode.fork` copies them into each branch), so a turn
played before a fork appears, identical (same prompt, same sampled ids), in every leaf below it. Under
``history="full"`` tree credit (:mod:`trl_env.trainer.tree_advantages`) gives the tokens of a shared node ``v``
its advantage ``A_v`` in one copy only, its *owner* (the first scorable sample through ``v``, in batch order),
and 0 in the others. Here the owner's turn sample of a shared turn is kept, with ``A_v`` (read off the
carrier's tree advantages), and the other copies are *dropped*: they would train nothing but cost a forward
and backward pass each (and a slot under ``max_turn_samples``). :func:`~trl_env.trainer.turn_samples.
expand_turn_samples` still counts the dropped copies' tokens where ``full`` counts them (the token
denominator), so every node weighs exactly what tree credit gives it under ``full``.

A turn belongs to the node its first sampled token lies in (its ``span`` start against the carrier's
``tree_branch_points``), or to its leaf's own part after the last branch point.

Example:
    >>> from trl_env.trainer.advantages import EpisodeCredit
    >>> def leaf(failed=False):  # a root forked after its first turn (carrier tokens [0, 3)) into two leaves
    ...     return EpisodeCredit([0, 1], [(0, 2), (3, 5)], [None] * 2, 6, 1.0, failed, ["r"], [3])
    >>> turns = [{"span": [0, 2]}, {"span": [3, 5]}]
    >>> shared_turn_copies([leaf(), leaf()], 2, 0, [turns, turns])
    [[False, False], [True, False]]
    >>> shared_turn_copies([leaf(failed=True), leaf()], 2, 0, [turns, turns])  # the first scorable leaf owns it
    [[True, False], [False, False]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trl_env.errors import InvariantError
from trl_env.trainer.tree_advantages import validate_tree

if TYPE_CHECKING:  # a type only: advantages.py imports tree_advantages
    from trl_env.trainer.advantages import EpisodeCredit

__all__ = ["shared_turn_copies", "turn_node"]


def turn_node(credit: EpisodeCredit, start: int) -> str | None:
    """The tree node a turn starting at carrier offset ``start`` lies in; None for the leaf's own part.

    Args:
        credit: the carrier's credit, with ``tree_nodes`` and ``tree_branch_points``.
        start: the turn's first completion offset in the carrier (its ``span`` start).

    Returns:
        The node's id, or None when the turn lies after the last branch point.

    Example:
        >>> from trl_env.trainer.advantages import EpisodeCredit
        >>> credit = EpisodeCredit([], [], [], 9, 0.0, tree_nodes=["0", "0.1"], tree_branch_points=[3, 6])
        >>> turn_node(credit, 0), turn_node(credit, 3), turn_node(credit, 6)
        ('0', '0.1', None)
    """
    for node, end in zip(credit.tree_nodes, credit.tree_branch_points, strict=True):
        if start < end:
            return node
    return None


def shared_turn_copies(
    credits: Sequence[EpisodeCredit], num_generations: int, first: int, rows: Sequence[Sequence[dict[str, Any]]]
) -> list[list[bool]]:
    """Per local carrier and turn sample: True for a copy of a shared turn whose node another sample owns.

    Args:
        credits: every process's carriers' credits (gathered, unscorable ones marked failed), groups contiguous.
        num_generations: samples per group.
        first: the index in ``credits`` of this process's first carrier.
        rows: this process's carriers' turn samples (each with its ``span`` in its carrier's completion).

    Returns:
        One list of flags per local carrier, one flag per turn sample: True where the sample is to be dropped
        (its node is owned by another sample, or by none: every sample through it failed).

    Raises:
        InvariantError: the local carriers do not lie within ``credits``.
    """
    if first < 0 or first + len(rows) > len(credits):
        raise InvariantError(f"carriers [{first}, {first + len(rows)}) outside the {len(credits)} gathered credits")
    owners = validate_tree(credits, num_generations)
    copies = []
    for offset, row in enumerate(rows):
        index = first + offset
        flags = []
        for sample in row:
            node = turn_node(credits[index], int(sample["span"][0]))
            flags.append(node is not None and owners[node][:1] != [index])
        copies.append(flags)
    return copies
