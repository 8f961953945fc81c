"""Turn-level advantages: every mode checked against numbers worked out by hand."""

import doctest

import pytest
import torch

from trl_env.trainer import advantages as adv_module
from trl_env.trainer.advantages import (
    EpisodeCredit,
    anchor_step_advantages,
    compute_advantages,
    discounted_returns,
    turn_advantages,
)

approx = pytest.approx


def credit(rewards, spans, length, keys=None, episode_reward=None, failed=False):
    keys = keys if keys is not None else [None] * len(rewards)
    reward = sum(rewards) if episode_reward is None else episode_reward
    return EpisodeCredit(rewards, spans, keys, length, episode_reward=reward, failed=failed)


def three_samples():
    """A: 2 turns, B: 1 turn, C: 3 turns; env tokens between and after the spans."""
    return [
        credit([0.0, 1.0], [(0, 2), (4, 6)], 7),  # env tokens at 2, 3 and 6
        credit([1.0], [(0, 2)], 3),  # env token at 2
        credit([0.0, 0.0, 0.5], [(0, 1), (3, 5), (7, 8)], 9),  # env tokens at 1, 2, 5, 6, 8
    ]


def test_discounted_returns_by_hand():
    # G2 = 2; G1 = 0 + 0.5 * 2 = 1; G0 = 1 + 0.5 * 1 = 1.5
    assert discounted_returns([1.0, 0.0, 2.0], gamma=0.5) == [1.5, 1.0, 2.0]
    assert discounted_returns([], gamma=0.9) == []


def test_episode_mode_by_hand_with_env_and_padding_positions_zero():
    group = [
        credit([1.0], [(0, 2)], 3),
        credit([0.0], [(1, 2)], 2),
        credit([0.0, 0.0], [(0, 1), (2, 3)], 4),
        credit([0.5, 0.5], [(0, 1), (3, 4)], 4),
    ]
    # rewards 1, 0, 0, 1: mean 0.5, unbiased std sqrt(1/3) = 0.577350; 0.5 / (0.577350 + 1e-4) = 0.865875
    a = 0.8658754
    expected = torch.tensor(
        [
            [a, a, 0, 0],  # env token at 2, padding at 3
            [0, -a, 0, 0],  # env token at 0, padding at 2, 3
            [-a, 0, -a, 0],  # env tokens at 1, 3
            [a, 0, 0, a],  # env tokens at 1, 2
        ]
    )
    result = compute_advantages(group, 4, "episode")
    assert result.dtype == torch.float32 and result.shape == (4, 4)
    assert torch.allclose(result, expected, atol=1e-6)
    assert (result[expected == 0] == 0).all()  # every env and padding position is exactly 0


def test_turn_mode_by_hand():
    # returns (gamma 1): A [1, 1], B [1], C [0.5, 0.5, 0.5]
    # turn 0: S = {A, B, C}, std([1, 1, 0.5]) = sqrt(1/12) = 0.288675
    #   A: 1 - mean(1, 0.5) = 0.25 -> 0.25 / 0.288775 = 0.865726; B the same; C: 0.5 - 1 = -0.5 -> -1.731451
    # turn 1: S = {A, C}, std([1, 0.5]) = 0.353553; A: 1 - 0.5 = 0.5 -> 1.413814; C: -1.413814
    # turn 2: only C -> 0
    result = compute_advantages(three_samples(), 3, "turn")
    a0, c0, a1 = 0.8657255, -1.7314510, 1.4138137
    expected = torch.tensor(
        [
            [a0, a0, 0, 0, a1, a1, 0, 0, 0],
            [a0, a0, 0, 0, 0, 0, 0, 0, 0],
            [c0, 0, 0, -a1, -a1, 0, 0, 0, 0],
        ]
    )
    assert torch.allclose(result, expected, atol=1e-6)
    assert (result[expected == 0] == 0).all()


def test_turn_mode_unscaled_and_discounted_by_hand():
    # gamma 0.5 returns: A [0.5, 1], B [1], C [0.125, 0.25, 0.5]
    # turn 0: A 0.5 - mean(1, 0.125) = -0.0625; B 1 - mean(0.5, 0.125) = 0.6875; C 0.125 - mean(0.5, 1) = -0.625
    # turn 1: A 1 - 0.25 = 0.75; C 0.25 - 1 = -0.75; turn 2: C alone -> 0
    per_turn = turn_advantages(three_samples(), 3, gamma=0.5, scale=False)
    assert per_turn == [approx([-0.0625, 0.75]), approx([0.6875]), approx([-0.625, -0.75, 0.0])]


def test_turn_baseline_leaves_the_sample_itself_out():
    # The baseline G - A of sample 0 must not move when sample 0's own return moves.
    baselines = []
    for own in (0.0, 3.0, -2.0):
        group = [credit([own], [(0, 1)], 1), credit([1.0], [(0, 1)], 1), credit([2.0], [(0, 1)], 1)]
        (a0,), _, _ = turn_advantages(group, 3, scale=False)
        baselines.append(own - a0)
    assert baselines == approx([1.5, 1.5, 1.5])


def test_anchor_mode_by_hand():
    group = [
        credit([0.0, 1.0], [(0, 1), (2, 3)], 3, keys=["s0", "s1"]),  # returns [1, 1], episode reward 1
        credit([0.0, 0.0], [(0, 1), (1, 2)], 2, keys=["s0", "s2"]),  # returns [0, 0], episode reward 0
        credit([0.5, 0.0], [(0, 1), (1, 2)], 3, keys=["s0", "s1"]),  # returns [0.5, 0], episode reward 0.5
    ]
    # episode term: rewards 1, 0, 0.5 -> mean 0.5, std 0.5 -> +-0.5 / 0.5001 = +-0.9998, C 0
    # step term: anchor s0 = {A 1, B 0, C 0.5}: A 1 - mean(0, 0.5) = 0.75, B 0 - 0.75 = -0.75,
    #   C 0.5 - mean(1, 0) = 0; anchor s1 = {A 1, C 0}: A +1, C -1; anchor s2 = {B} alone: 0
    assert anchor_step_advantages(group, 3) == [approx([0.75, 1.0]), approx([-0.75, 0.0]), approx([0.0, -1.0])]
    e = 0.9998000
    result = compute_advantages(group, 3, "anchor", step_weight=1.0)
    expected = torch.tensor(
        [
            [e + 0.75, 0, e + 1.0],  # env token at 1
            [-e - 0.75, -e, 0],  # padding at 2
            [0.0, -1.0, 0],  # env token at 2
        ]
    )
    assert torch.allclose(result, expected, atol=1e-6)
    assert (result[:, 1][:1] == 0).all() and (result[1:, 2] == 0).all()  # env token and padding
    half = compute_advantages(group, 3, "anchor", step_weight=0.5)
    assert half[0, 2].item() == approx(e + 0.5)


def test_anchor_with_zero_weight_is_episode_mode():
    group = [credit([0.0, 1.0], [(0, 1), (2, 3)], 3, keys=["s", "t"]), credit([0.5], [(1, 3)], 3, keys=["s"])]
    assert torch.equal(compute_advantages(group, 2, "anchor", step_weight=0.0), compute_advantages(group, 2, "episode"))


def test_anchor_revisits_within_one_sample_and_missing_keys_carry_no_step_signal():
    group = [
        credit([1.0, 0.0, 2.0], [(0, 1), (1, 2), (2, 3)], 3, keys=["loop", "loop", None]),
        credit([0.0], [(0, 1)], 1, keys=["other"]),
    ]
    assert anchor_step_advantages(group, 2) == [[0.0, 0.0, 0.0], [0.0]]


@pytest.mark.parametrize("mode", ["episode", "turn", "anchor"])
def test_failed_sample_gets_zero_and_is_left_out_of_the_baseline(mode):
    keys = [["s0", "s1"], ["s0"], ["s0", "s1", "s2"]]
    healthy = [
        EpisodeCredit(c.turn_rewards, c.turn_spans, k, c.completion_length, c.episode_reward)
        for c, k in zip(three_samples(), keys, strict=True)
    ]
    broken = credit([9.0, -4.0], [(0, 3), (3, 6)], 6, keys=["s0", "s1"], episode_reward=9.0, failed=True)
    with_failure = healthy[:2] + [broken] + healthy[2:]
    result = compute_advantages(with_failure, 4, mode)
    assert (result[2] == 0).all()
    without = compute_advantages(healthy, 3, mode)
    assert torch.allclose(result[[0, 1, 3]], without, atol=1e-6)


def test_failed_sample_in_episode_mode_by_hand():
    group = [credit([1.0], [(0, 1)], 1), credit([0.0], [(0, 1)], 1), credit([7.0], [(0, 1)], 1, failed=True)]
    group.append(credit([0.0], [(0, 1)], 1))
    # scorable rewards 1, 0, 0: mean 1/3, std sqrt(1/3): (2/3) / 0.577450 = 1.154501, (-1/3) / 0.577450 = -0.577250
    assert compute_advantages(group, 4, "episode")[:, 0].tolist() == approx([1.1545006, -0.5772503, 0.0, -0.5772503])


def test_groups_do_not_share_statistics():
    one = [credit([1.0], [(0, 1)], 1), credit([0.0], [(0, 1)], 1)]
    other = [credit([5.0], [(0, 1)], 1), credit([5.0], [(0, 1)], 1)]
    for mode in ("episode", "turn", "anchor"):
        both = compute_advantages(one + other, 2, mode)
        assert torch.equal(both[:2], compute_advantages(one, 2, mode))
        assert (both[2:] == 0).all()  # equal rewards within the second group: no signal


def test_the_episode_term_can_come_from_outside():
    group = [credit([1.0], [(0, 2)], 2), credit([0.0], [(0, 1)], 2)]
    result = compute_advantages(group, 2, "episode", episode=torch.tensor([0.25, -0.25]), width=3)
    assert result.tolist() == [[0.25, 0.25, 0.0], [-0.25, 0.0, 0.0]]


@pytest.mark.parametrize(
    ("samples", "kwargs", "message"),
    [
        ([credit([1.0], [(0, 1)], 1)] * 3, {}, "3 samples do not split into groups of num_generations=2"),
        ([credit([1.0], [(0, 1)], 1), credit([1.0, 2.0], [(0, 1)], 1)], {}, "sample 1: turn_rewards, turn_spans"),
        ([credit([1.0, 1.0], [(0, 2), (1, 3)], 3)] * 2, {}, r"sample 0, turn 1: span \[1, 3\)"),
        ([credit([1.0], [(0, 4)], 3)] * 2, {}, r"sample 0, turn 0: span \[0, 4\).*length 3"),
        ([credit([float("nan")], [(0, 1)], 1)] * 2, {}, "sample 0: turn_rewards must be finite"),
        ([credit([1.0], [(0, 1)], 5)] * 2, {"width": 4}, "completion_length of 5 does not fit width 4"),
        ([credit([1.0], [(0, 1)], 1)] * 2, {"mode": "token"}, "mode must be one of"),
        ([credit([1.0], [(0, 1)], 1, episode_reward=float("inf"))] * 2, {"mode": "episode"}, "sample 0: episode_"),
        ([credit([1.0], [(0, 1)], 1)] * 2, {"mode": "anchor", "episode": torch.zeros(3)}, r"shape \(2,\)"),
    ],
)
def test_bad_input_names_what_and_where(samples, kwargs, message):
    with pytest.raises(ValueError, match=message):
        compute_advantages(samples, 2, **{"mode": "turn", **kwargs})


def test_docstring_examples_run():
    result = doctest.testmod(adv_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 5 and result.failed == 0
