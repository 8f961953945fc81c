"""Guess-the-number's rewards: information gain per turn by hand, the old ratio unchanged, turn credit from both."""

from __future__ import annotations

import math

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from examples.guess_number import GuessNumberEnv
from examples.guess_number.rewards import information
from examples.vault_doors import VaultDoorsEnv
from tests.examples.episodes import play
from trl_env.errors import ConfigError
from trl_env.trainer.advantages import EpisodeCredit, turn_advantages


def rewards_after(env: GuessNumberEnv | VaultDoorsEnv, seed: str, actions: list[str]) -> list[float]:
    """``env.reward`` after each of ``actions``."""
    env, _ = env.reset(seed)
    return [env.step(action)[0].reward for action in actions]


def turn_rewards(env: GuessNumberEnv | VaultDoorsEnv, seed: str, actions: list[str]) -> list[float]:
    """Each turn's reward as trl-env records it: the change of ``env.reward`` the step caused."""
    after = rewards_after(env, seed, actions)
    return [round(now - before, 9) for before, now in zip([0.0, *after], after, strict=False)]


def test_binary_search_gains_a_quarter_per_halving_and_the_success_term_on_the_last_guess():
    # 16 -> 8 -> 4 -> 1 candidates (1, 1 and 2 of 4 bits), then the guess that says it: +1 success, 0 information
    assert turn_rewards(GuessNumberEnv(reward="info_gain"), "13", ["8", "12", "14", "13"]) == [0.25, 0.25, 0.5, 1.0]
    env, _ = play(GuessNumberEnv(reward="info_gain"), "13", ["8", "12", "14", "13"])
    assert env.reward == 2.0 and env.metrics()["success"] == 1.0
    # an uneven split gains what it shrinks: 16 -> 7 candidates is log2(16/7) bits
    assert turn_rewards(GuessNumberEnv(reward="info_gain"), "3", ["8"]) == [pytest.approx(math.log2(16 / 7) / 4)]


def test_a_lucky_first_guess_gains_everything_at_once():
    assert turn_rewards(GuessNumberEnv(reward="info_gain"), "8", ["8"]) == [2.0]


def test_repeated_inconsistent_and_invalid_guesses_gain_exactly_zero():
    actions = ["8", "8", "4", "hello", "20"]  # secret 11: 8 halves; then a repeat, 4 (< 9), no number, out of range
    assert turn_rewards(GuessNumberEnv(reward="info_gain"), "11", actions) == [0.25, 0.0, 0.0, 0.0, 0.0]


def test_pinning_the_secret_down_without_saying_it_earns_the_information_but_no_success():
    env, deltas = play(GuessNumberEnv(reward="info_gain", max_turns=4), "16", ["8", "12", "14", "15"])
    assert deltas[-1] == "Higher than 15." and env.candidates() == 1 and not env.alive
    assert env.reward == 1.0 and env.metrics()["success"] == 0.0


@settings(max_examples=80, deadline=None)
@given(
    guesses=st.lists(st.one_of(st.integers(-2, 19).map(str), st.text(max_size=5)), min_size=1, max_size=6),
    secret=st.integers(1, 16),
)
@example(guesses=["2", "1"], secret=1)  # the secret pinned down (reward 1.0) before it is said (+1 success)
def test_every_turn_gains_its_shrink_factor_and_the_total_is_information_plus_success(guesses, secret):
    env, _ = GuessNumberEnv(reward="info_gain").reset(str(secret))
    for action in guesses:
        before_reward, before_candidates, solved_before = env.reward, env.candidates(), env.solved
        env, _ = env.step(action)
        solved_now = env.solved and not solved_before  # not `before_reward < 1`: pinning the secret down earns 1.0
        gained = math.log2(before_candidates / env.candidates()) / 4 + (1.0 if solved_now else 0.0)
        assert env.reward - before_reward == pytest.approx(gained, abs=1e-8)
    assert env.reward == pytest.approx(float(env.solved) + information(env.candidates(), 16), abs=1e-8)
    assert 0.0 <= env.reward <= 2.0 and (env.reward >= 2.0 - 1e-9) == env.solved


@pytest.mark.parametrize("actions", [["hello", "8", "4", "14", "I think 11."], ["8", "8", "9", "16", "1"]])
def test_the_ratio_reward_is_unchanged_and_still_the_default(actions):
    default = rewards_after(GuessNumberEnv(), "11", actions)
    assert default == rewards_after(GuessNumberEnv(reward="ratio"), "11", actions)
    if actions[0] == "hello":  # the trajectory tests/examples/test_example_guess_number.py checks term by term
        assert default == pytest.approx([0.0, 0.15, 0.4 / 3, 0.175, 1.2])


def test_an_unknown_reward_is_refused_with_the_choices():
    message = r"GuessNumberEnv: reward must be one of \('ratio', 'info_gain'\), got 'bits'"
    with pytest.raises(ConfigError, match=message):
        GuessNumberEnv(reward="bits")
    with pytest.raises(ConfigError, match="reward must be one of"):
        VaultDoorsEnv(reward="bits")


def test_vault_doors_passes_the_reward_on_and_the_door_turn_earns_nothing():
    env, _ = VaultDoorsEnv(reward="info_gain").reset("train-3")
    door, code = env.door, env.code.secret
    low, high, actions = 1, 8, [str(door)]
    while True:  # a binary search over 1..8 (log2 8 = 3 bits), written out by hand
        guess = (low + high) // 2
        actions.append(str(guess))
        if guess == code:
            break
        low, high = (guess + 1, high) if guess < code else (low, guess - 1)
    rewards = turn_rewards(VaultDoorsEnv(reward="info_gain"), "train-3", actions)
    assert rewards[0] == 0.0 and sum(rewards) == pytest.approx(2.0) and rewards[-1] >= 1.0
    wrong = turn_rewards(VaultDoorsEnv(reward="info_gain"), "train-3", [str(door % 3 + 1)])
    assert wrong == [0.0]


def test_turn_credit_from_information_gain_follows_what_each_turn_still_gains():
    """Two episodes of secret 13 (one GRPO group): a binary search, and one stuck repeating an excluded 4."""
    search, stuck = ["8", "12", "14", "13"], ["8", "4", "4", "4", "4"]

    def advantages(reward: str) -> list[list[float]]:
        group = []
        for actions in (search, stuck):
            rewards = turn_rewards(GuessNumberEnv(reward=reward), "13", actions)
            spans = [(2 * t, 2 * t + 1) for t in range(len(actions))]
            group.append(EpisodeCredit(rewards, spans, [None] * len(actions), 2 * len(actions), sum(rewards)))
        return turn_advantages(group, 2, scale=False)  # two samples: A = G_i[t] - G_j[t]

    # information gain: search earns [.25, .25, .5, 1] (returns 2, 1.75, 1.5, 1), stuck [.25, 0, 0, 0, 0]
    # (returns .25, 0, 0, 0, 0); the first guess is the same, but what follows it differs by 1.75
    gain = advantages("info_gain")
    assert gain[0] == pytest.approx([1.75, 1.75, 1.5, 1.0])
    assert gain[1] == pytest.approx([-1.75, -1.75, -1.5, -1.0, 0.0])  # turn 4: nobody else got that far
    # the ratio: search [.3, 0, 0, 1] (a good guess after good guesses earns 0), stuck pays back its ratio's fall
    stuck_rewards = turn_rewards(GuessNumberEnv(reward="ratio"), "13", stuck)
    assert turn_rewards(GuessNumberEnv(reward="ratio"), "13", search) == pytest.approx([0.3, 0.0, 0.0, 1.0])
    assert stuck_rewards[1] == pytest.approx(-0.1) and all(r < 0 for r in stuck_rewards[1:])
    assert advantages("ratio")[0] != pytest.approx(gain[0])
