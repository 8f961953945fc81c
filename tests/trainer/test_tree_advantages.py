"""Tree advantages: shared prefixes credited once with their subtree's mean, checked against hand-computed values."""

import doctest
from dataclasses import replace

import pytest
import torch

from trl_env.episode import Episode, Turn
from trl_env.trainer import tree_advantages as tree_module
from trl_env.trainer.advantages import EpisodeCredit, compute_advantages
from trl_env.trainer.rollout_batch import episodes_to_batch
from trl_env.trainer.turn_level_grpo import _credit

# Each sample below: a path of segments, each [model token, env token] (2 tokens), e.g. a trunk turn then a
# leaf turn: completion [m, e, m, e], turn spans (0, 1) and (2, 3), branch point 2 after the trunk's env token.


def leaf(reward, nodes, segments=None, failed=False, extra=0):
    """A sample passing through ``nodes`` (one 2-token segment each) then its own ``extra + 1``-token-turn segment."""
    segments = len(nodes) + 1 if segments is None else segments
    spans = [(2 * k, 2 * k + 1) for k in range(segments)]
    spans[-1] = (spans[-1][0], spans[-1][1] + extra)
    points = [2 * (k + 1) for k in range(len(nodes))]
    return EpisodeCredit(
        [0.0] * (segments - 1) + [reward],
        spans,
        [None] * segments,
        2 * segments + extra,
        episode_reward=reward,
        failed=failed,
        tree_nodes=nodes,
        tree_branch_points=points,
    )


def test_two_trunks_of_two_branches_by_hand():
    group = [leaf(1.0, ["a"]), leaf(0.0, ["a"]), leaf(0.0, ["b"]), leaf(0.0, ["b"], extra=1)]
    # leaves 1, 0, 0, 0: mean 0.25, unbiased std sqrt((0.5625 + 3 * 0.0625) / 3) = 0.5
    # leaf 1: 0.75 / 0.5001 = 1.4997001; leaf 0: -0.25 / 0.5001 = -0.4999000
    # trunk a: mean(1, 0) = 0.5 -> 0.25 / 0.5001 = 0.4999000, in sample 0 only; trunk b: mean 0 -> -0.4999000, sample 2
    one, zero, a, b = 1.4997001, -0.4999000, 0.4999000, -0.4999000
    expected = torch.tensor(
        [
            [a, 0, one, 0, 0],  # env tokens at 1 and 3, padding at 4
            [0, 0, zero, 0, 0],  # the second copy of trunk a: 0
            [b, 0, zero, 0, 0],
            [0, 0, zero, zero, 0],  # a 2-token leaf turn, env token at 4
        ]
    )
    result = compute_advantages(group, 4, "tree")
    assert result.dtype == torch.float32 and torch.allclose(result, expected, atol=1e-6)
    assert (result[expected == 0] == 0).all()  # env tokens, padding and the other copies are exactly 0
    # each trunk is credited once: summed over its copies, it carries its subtree mean's advantage
    assert result[:2, 0].sum().item() == pytest.approx(a) and result[2:, 0].sum().item() == pytest.approx(b)


def test_unscorable_leaves_are_left_out_and_own_nothing():
    group = [leaf(1.0, ["a"]), leaf(0.0, ["a"]), leaf(7.0, ["b"], failed=True), leaf(1.0, ["b"])]
    # scorable leaves 1, 0, 1: mean 2/3, std sqrt(1/3) = 0.5773503 (+1e-4 = 0.5774503)
    # leaf 1: (1/3) / 0.5774503 = 0.5772503; leaf 0: -(2/3) / 0.5774503 = -1.1545006
    # trunk a: mean(1, 0) = 0.5 -> -(1/6) / 0.5774503 = -0.2886251 (sample 0)
    # trunk b: its only scorable leaf is sample 3 (1.0) -> 0.5772503, owned by sample 3, not the failed sample 2
    one, zero, a = 0.5772503, -1.1545006, -0.2886251
    expected = torch.tensor([[a, 0, one, 0], [0, 0, zero, 0], [0, 0, 0, 0], [one, 0, one, 0]])
    assert torch.allclose(compute_advantages(group, 4, "tree"), expected, atol=1e-6)
    # a node whose every leaf is unscorable has no value: 0 in every copy
    lost = [leaf(1.0, ["a"]), leaf(0.0, ["a"]), leaf(1.0, ["b"], failed=True), leaf(1.0, ["b"], failed=True)]
    result = compute_advantages(lost, 4, "tree")
    assert (result[2:] == 0).all() and result[0, 0].item() == pytest.approx(0.0, abs=1e-6)


def test_depth_two_with_two_roots_by_hand():
    group = [
        leaf(1.0, ["r", "r0"]), leaf(1.0, ["r", "r0"]), leaf(1.0, ["r", "r1"]), leaf(0.0, ["r", "r1"]),
        leaf(0.0, ["q", "q0"]), leaf(0.0, ["q", "q0"]), leaf(0.0, ["q", "q1"]), leaf(1.0, ["q", "q1"]),
    ]  # fmt: skip
    # leaves 1,1,1,0,0,0,0,1: mean 0.5, std sqrt(8 * 0.25 / 7) = 0.5345225 (+1e-4): leaf +-0.5 / 0.5346225 = +-0.9352394
    # roots: r mean 0.75 -> +0.4676197, q mean 0.25 -> -0.4676197
    # children: r0 mean 1 -> +0.9352394, r1 mean 0.5 -> 0, q0 mean 0 -> -0.9352394, q1 mean 0.5 -> 0
    one, r, r0 = 0.9352394, 0.4676197, 0.9352394
    expected = torch.tensor(
        [
            [r, 0, r0, 0, one, 0],
            [0, 0, 0, 0, one, 0],
            [0, 0, 0, 0, one, 0],  # owns r1, whose value is 0
            [0, 0, 0, 0, -one, 0],
            [-r, 0, -r0, 0, -one, 0],
            [0, 0, 0, 0, -one, 0],
            [0, 0, 0, 0, -one, 0],
            [0, 0, 0, 0, one, 0],
        ]
    )
    assert torch.allclose(compute_advantages(group, 8, "tree"), expected, atol=1e-6)


def test_one_root_per_group_gives_its_trunk_no_signal():
    # with a single root the trunk's subtree is the whole group: its mean is the baseline
    group = [leaf(1.0, ["r"]), leaf(0.0, ["r"]), leaf(0.0, ["r"]), leaf(0.0, ["r"])]
    result = compute_advantages(group, 4, "tree")
    assert result[:, 0].abs().max().item() < 1e-6 and result[0, 2].item() == pytest.approx(1.4997001)


def test_an_episode_that_ended_before_the_fork_is_one_node_credited_once():
    # root b ended before the branch turn: the engine copies it as is, a node covering all of it, no leaf tokens
    ended = [EpisodeCredit([1.0], [(0, 1)], [None], 2, 1.0, tree_nodes=["b"], tree_branch_points=[2])] * 2
    group = [leaf(1.0, ["a"]), leaf(0.0, ["a"]), *ended]
    # leaves 1, 0, 1, 1: mean 0.75, std 0.5: a = (0.5 - 0.75) / 0.5001 = -0.4999000, b = 0.25 / 0.5001 = 0.4999000
    # leaf of sample 0: 0.4999000, of sample 1: -0.75 / 0.5001 = -1.4997001
    expected = torch.tensor([[-0.4999, 0, 0.4999, 0], [0, 0, -1.4997001, 0], [0.4999, 0, 0, 0], [0, 0, 0, 0]])
    assert torch.allclose(compute_advantages(group, 4, "tree"), expected, atol=1e-4)


def test_depth_zero_is_exactly_episode_mode():
    group = [
        EpisodeCredit([0.0, 1.0], [(0, 2), (4, 6)], [None, None], 7, 1.0),
        EpisodeCredit([1.0], [(0, 2)], [None], 3, 1.0),
        EpisodeCredit([0.0, 0.5], [(0, 1), (3, 5)], [None, None], 9, 0.5),
        EpisodeCredit([2.0], [(1, 2)], [None], 3, 2.0, failed=True),
    ]
    assert torch.equal(compute_advantages(group, 4, "tree"), compute_advantages(group, 4, "episode"))
    trl = torch.tensor([0.3, -0.1, 0.2, 0.0])
    assert torch.equal(
        compute_advantages(group, 2, "tree", episode=trl), compute_advantages(group, 2, "episode", episode=trl)
    )


def test_nodes_take_the_mean_of_the_given_episode_advantages_of_their_scorable_leaves():
    # the trainer passes TRL's own advantages (any scale_rewards); a failed leaf's 0 must not enter the mean
    group = [leaf(0.0, ["a"]), leaf(0.0, ["a"]), leaf(0.0, ["b"], failed=True), leaf(0.0, ["b"])]
    result = compute_advantages(group, 4, "tree", episode=torch.tensor([0.3, 0.1, 0.0, -0.2]))
    assert result[:, 0].tolist() == pytest.approx([0.2, 0.0, 0.0, -0.2])
    assert result[:, 2].tolist() == pytest.approx([0.3, 0.1, 0.0, -0.2])


@pytest.mark.parametrize(
    ("group", "message"),
    [
        ([leaf(1.0, ["a"]), EpisodeCredit([], [], [], 4, 0.0, tree_nodes=["a"], tree_branch_points=[2, 3])],
         "sample 1: tree_nodes and tree_branch_points differ in length"),
        ([leaf(1.0, ["a"]), EpisodeCredit([], [], [], 4, 0.0, tree_nodes=["a"], tree_branch_points=[3])],
         r"sample 1: tree node 'a' covers \[0, 3\) after \[\], but in sample 0 it covers \[0, 2\)"),
        ([leaf(1.0, ["a", "c"]), leaf(1.0, ["b", "c"])],
         r"sample 1: tree node 'c' covers \[2, 4\) after \['b'\], but in sample 0 it covers \[2, 4\) after \['a'\]"),
        ([leaf(1.0, ["a", "c"]), EpisodeCredit([], [], [], 4, 0.0, tree_nodes=["a", "c"], tree_branch_points=[3, 2])],
         r"sample 1: tree_branch_points must be ordered int offsets .* got \[3, 2\]"),
        ([leaf(1.0, ["a"]), EpisodeCredit([], [], [], 4, 0.0, tree_nodes=["b"], tree_branch_points=[5])],
         r"within the completion \(length 4\); got \[5\]"),
    ],
)  # fmt: skip
def test_malformed_trees_name_the_sample_and_the_node(group, message):
    with pytest.raises(ValueError, match=message):
        compute_advantages(group, 2, "tree")


def test_a_node_shared_across_groups_is_refused():
    with pytest.raises(ValueError, match="samples 0 and 2 share tree node 'a' but are in different groups"):
        compute_advantages([leaf(1.0, ["a"]), leaf(0.0, ["b"]), leaf(1.0, ["a"]), leaf(0.0, ["c"])], 2, "tree")


def test_tree_fields_travel_from_episodes_through_the_batch_to_the_credits():
    episodes = []
    for reward, node in [(1.0, "a"), (0.0, "a"), (0.0, "b"), (0.0, "b")]:
        episode = Episode(seed="s", prompt_ids=[1], prompt_text="p", reward=reward, tree_nodes=[node])
        for turn, turn_reward in enumerate((0.0, reward)):
            episode.add_model_tokens([5], [-0.5], "m")
            episode.add_env_tokens([7], "e")
            episode.turns.append(Turn("m", "", "m", True, True, "e", span=(2 * turn, 2 * turn + 1), reward=turn_reward))
        episode.tree_branch_points = [2]  # forked after the first turn's env tokens
        episodes.append(episode)
    batch = episodes_to_batch(episodes, turn_end_id=2)
    assert batch["tree_nodes"] == [["a"], ["a"], ["b"], ["b"]] and batch["tree_branch_points"] == [[2]] * 4
    rows = [{key: values[i] for key, values in batch.items()} for i in range(4)]
    credits = [_credit(row, 4, i, tree=True) for i, row in enumerate(rows)]
    credits = [replace(c, episode_reward=e.reward) for c, e in zip(credits, episodes, strict=True)]
    # as in test_two_trunks_of_two_branches_by_hand: trunk a 0.4999 in sample 0, trunk b -0.4999 in sample 2
    trunks = compute_advantages(credits, 4, "tree")[:, 0].tolist()
    assert trunks == pytest.approx([0.4999, 0.0, -0.4999, 0.0], abs=1e-4)
    plain = episodes_to_batch([Episode(seed="s", prompt_ids=[1], prompt_text="")], turn_end_id=2)
    assert plain["tree_nodes"] == [[]] and plain["tree_branch_points"] == [[]]


def test_docstring_examples_run():
    result = doctest.testmod(tree_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0
