"""``TreeShape``: where tree rollouts fork, and how wide.

A tree rollout plays one *root* episode per ``leaves_per_root`` samples, forks every episode after the
model turns in ``branch_turns`` into ``branches`` copies (:meth:`trl_env.envpool.pool.EnvPool.fork`),
and returns one sample per leaf path, so that a GRPO group of ``num_generations`` samples holds
``roots(num_generations)`` roots. Every root yields exactly ``leaves_per_root`` samples: an episode
already over at a branch turn (finished or failed) is copied as it is, without forking its env, and its
copies share it as one node (:mod:`trl_env.trainer.tree_advantages` credits it once).

Samples describe their place in the tree with ``tree_nodes`` and ``tree_branch_points``;
:func:`leaf_nodes` names the nodes so that ids are unique within a batch. :func:`root_seeds` reads a rollout's
seeds as roots (one per block of ``leaves_per_root`` equal seeds), and :func:`leaf_copies` gives an ended
episode's leaves their output positions.

Example:
    >>> shape = TreeShape(branch_turns=(1,), branches=4)
    >>> shape.leaves_per_root, shape.roots(8), shape.branches_after(1), shape.branches_after(2)
    (4, 2, 4, 1)
    >>> TreeShape.parse("1,3x2,3")
    TreeShape(branch_turns=(1, 3), branches=(2, 3))
    >>> shape.roots(6)
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigError: num_generations=6 is not a multiple of the 4 leaves per root of TreeShape(...)
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from copy import deepcopy
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trl_env.errors import ConfigError, ConfigTypeError

if TYPE_CHECKING:
    from trl_env.episode import Episode

__all__ = ["TreeShape", "leaf_copies", "leaf_nodes", "root_seeds"]


@dataclass(frozen=True)
class TreeShape:
    """The shape of every root's tree (frozen, validated at construction).

    Attributes:
        branch_turns: the model turns (counting from 1, increasing) after which each episode forks; the
            fork copies the env after that turn's step, so every branch starts with its own next turn.
            Empty: no forks (plain GRPO, one root per sample).
        branches: how many branches each fork makes (>= 2): one number for every fork, or one per branch turn.
    """

    branch_turns: tuple[int, ...]
    branches: int | tuple[int, ...] = 2

    def __post_init__(self) -> None:
        turns = tuple(self.branch_turns) if isinstance(self.branch_turns, list | tuple) else None
        if turns is None or any(isinstance(t, bool) or not isinstance(t, int) for t in turns):
            raise ConfigTypeError(f"TreeShape.branch_turns must be a tuple of ints, got {self.branch_turns!r}")
        if any(t < 1 for t in turns) or list(turns) != sorted(set(turns)):
            raise ConfigError(f"TreeShape.branch_turns must be increasing turn numbers >= 1, got {turns}")
        branches = self.branches
        if isinstance(branches, int) and not isinstance(branches, bool):
            ok = branches >= 2
        elif isinstance(branches, list | tuple) and all(type(b) is int for b in branches):
            branches = tuple(branches)
            ok = len(branches) == len(turns) and all(b >= 2 for b in branches)
        else:
            raise ConfigTypeError(f"TreeShape.branches must be an int or a tuple of ints, got {self.branches!r}")
        if not ok:
            raise ConfigError(
                f"TreeShape.branches must be >= 2: one number, or one per branch turn ({len(turns)}); got {branches!r}"
            )
        object.__setattr__(self, "branch_turns", turns)
        object.__setattr__(self, "branches", branches)

    @property
    def fanouts(self) -> tuple[int, ...]:
        """The number of branches at each branch turn, in order."""
        return (self.branches,) * len(self.branch_turns) if isinstance(self.branches, int) else self.branches

    @property
    def leaves_per_root(self) -> int:
        """Samples (leaf paths) per root: the product of the fanouts."""
        return math.prod(self.fanouts)

    def branches_after(self, turn: int) -> int:
        """Into how many branches an episode splits after model turn ``turn`` (1: it does not fork there)."""
        return dict(zip(self.branch_turns, self.fanouts, strict=True)).get(turn, 1)

    def roots(self, num_generations: int) -> int:
        """Root episodes per GRPO group of ``num_generations`` samples.

        Raises:
            ValueError: ``num_generations`` is not a multiple of :attr:`leaves_per_root`.
        """
        if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1:
            raise ConfigError(f"num_generations must be an int >= 1, got {num_generations!r}")
        if num_generations % self.leaves_per_root:
            raise ConfigError(
                f"num_generations={num_generations} is not a multiple of the {self.leaves_per_root} leaves per root "
                f"of {self!r}"
            )
        return num_generations // self.leaves_per_root

    @classmethod
    def parse(cls, text: str) -> TreeShape:
        """``"TURNS x BRANCHES"``, comma-separated lists: ``"1x4"``, ``"1,3x2"``, ``"1,3x2,3"`` (a command-line form).

        Example:
            >>> TreeShape.parse("2x4")
            TreeShape(branch_turns=(2,), branches=4)
        """
        turns, sep, widths = text.replace(" ", "").partition("x")
        try:
            numbers = [int(w) for w in widths.split(",")] if sep else []
            shape = cls(tuple(int(t) for t in turns.split(",")), numbers[0] if len(numbers) == 1 else tuple(numbers))
        except (TypeError, ValueError) as error:
            raise ConfigError(
                f"a tree shape reads TURNS x BRANCHES, e.g. '1x4' or '1,3x2,3'; got {text!r}: {error}"
            ) from None
        return shape


def leaf_nodes(root: int, path: tuple[int, ...]) -> list[str]:
    """The ``tree_nodes`` of the leaf reached from root number ``root`` (unique in the batch) by ``path``.

    ``path[j]`` is the branch taken at the j-th fork. The leaf passes through the root's trunk, then one node
    per fork but the last (what follows the last fork is the leaf's own).

    Example:
        >>> leaf_nodes(3, (1, 0))
        ['3', '3.1']
        >>> leaf_nodes(3, ())  # no forks: a plain episode
        []
    """
    return [".".join(map(str, (root, *path[:depth]))) for depth in range(len(path))]


def root_seeds(tree: TreeShape | None, seeds: Sequence[str]) -> list[str]:
    """The seeds of the root episodes: every seed, or with a tree one per block of equal seeds.

    Raises:
        ConfigError: with a tree, the seeds are not blocks of ``leaves_per_root`` equal seeds.

    Example:
        >>> root_seeds(TreeShape((1,), 2), ["a", "a", "b", "b"]), root_seeds(None, ["a", "a"])
        (['a', 'b'], ['a', 'a'])
    """
    size = tree.leaves_per_root if tree else 1
    if size == 1:
        return list(seeds)
    blocks = [list(seeds[i : i + size]) for i in range(0, len(seeds), size)]
    bad = next((block for block in blocks if len(block) != size or len(set(block)) != 1), None)
    if bad is not None:
        raise ConfigError(
            f"a tree rollout ({tree}) plays each block of {size} consecutive seeds as one root, "
            f"so there must be a multiple of {size} seeds, equal within each block; got the block {bad}"
        )
    return [block[0] for block in blocks]


def leaf_copies(
    tree: TreeShape, episode: Episode, root: int, path: tuple[int, ...], branch_points: list[int]
) -> Iterator[tuple[int, Episode]]:
    """Each output position of an ended episode of root ``root`` reached by ``path``, with its leaf there.

    The leaves get their ``tree_nodes`` (the prefixes they share) and ``tree_branch_points``; the first is
    ``episode`` itself. An episode that ended before all the tree's forks is copied as it is, once per leaf it
    would have had: its tokens after its last fork are one node of all those copies (credited once).
    """
    left = tree.fanouts[len(path) :]
    end = len(episode.completion_ids)
    for number, rest in enumerate(itertools.product(*(range(width) for width in left))):
        leaf = episode if number == 0 else deepcopy(episode)
        full = (*path, *rest)
        leaf.tree_nodes = leaf_nodes(root, full)
        leaf.tree_branch_points = [*branch_points, *([end] * len(left))]
        position = 0
        for width, branch in zip(tree.fanouts, full, strict=True):
            position = position * width + branch
        yield root * tree.leaves_per_root + position, leaf
