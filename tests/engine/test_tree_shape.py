"""TreeShape: validation, roots per group, the command-line form, and node ids the tree advantages accept."""

import dataclasses
import doctest
import itertools

import pytest

from trl_env.engine import tree as tree_module
from trl_env.engine.tree import TreeShape, leaf_nodes
from trl_env.trainer.advantages import EpisodeCredit
from trl_env.trainer.tree_advantages import validate_tree


def test_roots_and_leaves():
    assert TreeShape((1,), 4).roots(8) == 2
    assert TreeShape((1, 3), (2, 3)).leaves_per_root == 6 and TreeShape((1, 3), (2, 3)).roots(12) == 2
    assert TreeShape((2, 3), 2).fanouts == (2, 2) and TreeShape((2, 3), 2).roots(4) == 1
    assert TreeShape(()).leaves_per_root == 1 and TreeShape(()).roots(5) == 5  # no forks: one root per sample
    shape = TreeShape([1, 3], [2, 3])  # lists are accepted and stored as tuples (the shape stays hashable)
    assert shape == TreeShape((1, 3), (2, 3)) and hash(shape) == hash(TreeShape((1, 3), (2, 3)))
    assert [shape.branches_after(turn) for turn in range(1, 5)] == [2, 1, 3, 1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        shape.branches = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("shape", "generations", "message"),
    [
        (TreeShape((1,), 4), 6, r"num_generations=6 is not a multiple of the 4 leaves per root of TreeShape"),
        (TreeShape((1, 2), 2), 2, r"num_generations=2 is not a multiple of the 4 leaves"),
        (TreeShape((1,), 2), 0, r"num_generations must be an int >= 1, got 0"),
        (TreeShape((1,), 2), True, r"num_generations must be an int >= 1, got True"),
    ],
)
def test_roots_refuses_a_group_size_the_tree_does_not_divide(shape, generations, message):
    with pytest.raises(ValueError, match=message):
        shape.roots(generations)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"branch_turns": (0,)}, ValueError, r"increasing turn numbers >= 1, got \(0,\)"),
        ({"branch_turns": (3, 1)}, ValueError, r"increasing turn numbers >= 1, got \(3, 1\)"),
        ({"branch_turns": (1, 1)}, ValueError, r"increasing"),
        ({"branch_turns": 1}, TypeError, r"branch_turns must be a tuple of ints, got 1"),
        ({"branch_turns": (1.0,)}, TypeError, r"tuple of ints"),
        ({"branch_turns": (True,)}, TypeError, r"tuple of ints"),
        ({"branch_turns": (1,), "branches": 1}, ValueError, r"branches must be >= 2.*got 1"),
        ({"branch_turns": (1, 2), "branches": (2,)}, ValueError, r"one per branch turn \(2\); got \(2,\)"),
        ({"branch_turns": (1,), "branches": True}, TypeError, r"branches must be an int or a tuple of ints, got True"),
        ({"branch_turns": (1,), "branches": "4"}, TypeError, r"branches must be an int or a tuple"),
    ],
)
def test_bad_shapes_are_refused_at_construction(kwargs, error, message):
    with pytest.raises(error, match=message):
        TreeShape(**kwargs)


def test_parse():
    assert TreeShape.parse("1x4") == TreeShape((1,), 4)
    assert TreeShape.parse(" 1, 3 x 2 ") == TreeShape((1, 3), 2)
    assert TreeShape.parse("1,3x2,3") == TreeShape((1, 3), (2, 3))
    for text in ("1", "x4", "1x1", "1x2,2", "ax2", ""):
        with pytest.raises(ValueError, match=rf"a tree shape reads TURNS x BRANCHES.*got '{text}'"):
            TreeShape.parse(text)


def test_leaf_nodes_build_a_tree_the_advantages_accept():
    # two roots of TreeShape((1, 2), 2): forks after the 2-token turns 1 and 2, so branch points at 2 and 4
    shape = TreeShape((1, 2), 2)
    samples = []
    for root in range(shape.roots(8)):
        for path in itertools.product(*(range(width) for width in shape.fanouts)):
            nodes = leaf_nodes(root, path)
            samples.append(EpisodeCredit([0.0] * 3, [(0, 2), (2, 4), (4, 6)], [None] * 3, 6, 0.0, False, nodes, [2, 4]))
    owners = validate_tree(samples, 8)
    # each root's trunk is shared by its 4 leaves, each first-fork node by 2, owned by the first of them
    assert owners == {"0": [0, 1, 2, 3], "0.0": [0, 1], "0.1": [2, 3], "1": [4, 5, 6, 7], "1.0": [4, 5], "1.1": [6, 7]}


def test_docstring_examples_run():
    assert doctest.testmod(tree_module, optionflags=doctest.ELLIPSIS).failed == 0
