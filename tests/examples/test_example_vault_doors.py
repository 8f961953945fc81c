"""VaultDoorsEnv: the first answer decides whether the vault can be reached; then guess-the-number."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from examples.vault_doors import VaultDoorsEnv, door_for_seed
from tests.examples.episodes import play
from trl_env.core import Env


def test_the_prompt_names_the_door_with_the_draught():
    env, prompt = VaultDoorsEnv().reset("train-0")
    assert f"A draught comes from door {env.door}" in prompt and "3 doors" in prompt and "5 answers" in prompt


def test_a_wrong_or_missing_door_ends_the_episode_with_nothing():
    door = door_for_seed("train-0", 3)
    for first in (str(door % 3 + 1), "no idea", "7"):
        env, deltas = play(VaultDoorsEnv(), "train-0", [first, "4", str(door)])
        assert deltas[1:] == ["The episode is over."] * 2
        assert "the vault cannot be reached" in deltas[0]
        assert (env.alive, env.reward) == (False, 0.0)
        assert env.metrics() == {"success": 0.0, "right_door": 0.0, "answers": 1.0}


def test_the_right_door_then_a_binary_search_opens_the_vault():
    env, _ = VaultDoorsEnv().reset("train-3")
    env, delta = env.step(f"Door {env.door}")
    assert delta.startswith(f"Door {env.door} opens") and env.alive and env.reward == 0.0
    low, high, turns = 1, 8, 1
    while env.alive:
        guess = (low + high) // 2
        env, delta = env.step(str(guess))
        turns += 1
        low, high = (
            (guess + 1, high)
            if delta.startswith("Higher")
            else (low, guess - 1)
            if delta.startswith("Lower")
            else (low, high)
        )
    assert delta.startswith("Correct!") and turns <= 5 and env.reward == 1.3
    assert env.metrics() == {"success": 1.0, "right_door": 1.0, "answers": float(turns)}


def test_seeds_spread_over_doors_and_codes_and_reset_clears():
    envs = [VaultDoorsEnv().reset(f"seed-{i}")[0] for i in range(60)]
    assert {e.door for e in envs} == {1, 2, 3} and len({e.code.secret for e in envs}) == 8
    env = VaultDoorsEnv()
    first = play(VaultDoorsEnv(), "seed-1", ["2", "5", "6"])[1]
    env.reset("seed-9")
    env.step("1")
    assert play(VaultDoorsEnv(), "seed-1", ["2", "5", "6"])[1] == first


@settings(max_examples=60, deadline=None)
@given(actions=st.lists(st.text(max_size=40), min_size=1, max_size=7), seed=st.text(max_size=20))
def test_arbitrary_text_never_raises_and_episodes_end_within_five_answers(actions, seed):
    env, _ = VaultDoorsEnv().reset(seed)
    assert isinstance(env, Env)
    for turn, action in enumerate(actions, 1):
        env, delta = env.step(action)
        assert isinstance(delta, str) and 0.0 <= env.reward <= 1.3
        if turn >= 5:
            assert env.alive is False
