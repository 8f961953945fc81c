"""GuessRoundsEnv: four games of guess-the-number in one episode, each worth the same share of the reward."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from examples.guess_rounds import GuessRoundsEnv
from trl_env.errors import ConfigError


def binary_search(env: GuessRoundsEnv) -> list[str]:
    """Play every round by bisection; the feedback lines, one per answer."""
    deltas, low, high = [], 1, 8
    while env.alive:
        guess = (low + high) // 2
        env, delta = env.step(f"My guess: {guess}")
        deltas.append(delta)
        if delta.startswith("Higher"):
            low = guess + 1
        elif delta.startswith("Lower"):
            high = guess - 1
        else:  # solved: the next round starts over the whole range
            low, high = 1, 8
    return deltas


def test_bisection_solves_every_round_and_earns_each_rounds_full_reward():
    env, prompt = GuessRoundsEnv().reset("train-5")
    assert prompt.startswith("Round 1 of 4. I am thinking of a whole number between 1 and 8")
    deltas = binary_search(env)
    starts = [d for d in deltas if " Round " in d]
    assert [d.split(" Round ")[1][:6] for d in starts] == ["2 of 4", "3 of 4", "4 of 4"]
    assert deltas[-1].startswith("Correct!") and " Round " not in deltas[-1]
    assert len(deltas) <= 16 and env.reward == 1.3
    assert env.metrics() == {"success": 1.0, "first_round": 1.0, "rounds_played": 4.0, "answers": len(deltas)}


def test_a_round_out_of_guesses_says_its_number_and_the_next_round_starts():
    env, _ = GuessRoundsEnv(rounds=2, turns_per_round=2).reset("train-1")
    secret = env.game.secret
    wrong = str(secret % 8 + 1)
    env, _ = env.step(wrong)
    env, delta = env.step(wrong)
    assert f"Out of guesses: the number was {secret}. Round 2 of 2" in delta and env.alive
    assert env.metrics()["rounds_played"] == 1.0  # round 2 has no guess yet
    env, delta = env.step(str(env.game.secret))
    assert delta.startswith("Correct!") and not env.alive
    assert env.metrics() == {"success": 0.5, "first_round": 0.0, "rounds_played": 2.0, "answers": 3.0}
    assert env.reward == 0.75  # (round 1's shaping 0.1 + 0.2 / 2 for a valid, then an inconsistent guess + 1.3) / 2


def test_rounds_have_their_own_secrets_and_the_same_seed_replays():
    env, _ = GuessRoundsEnv().reset("a")
    played = binary_search(env)
    env.reset("zzz")
    env.step("3")
    env, _ = env.reset("a")  # reset clears the other episode
    assert binary_search(env) == played
    distinct = []
    for seed in ("a", "b", "c"):
        env, _ = GuessRoundsEnv().reset(seed)
        secrets = []
        while env.alive:
            secrets.append(env.game.secret)
            env.step(str(env.game.secret))
        distinct.append(len(set(secrets)))
    assert max(distinct) > 1


def test_bad_settings_are_refused_with_their_name():
    for kwargs, name in (({"rounds": 0}, "rounds"), ({"reward": "points"}, "reward")):
        try:
            GuessRoundsEnv(**kwargs)
        except ConfigError as error:
            assert "GuessRoundsEnv" in str(error) and name in str(error)
        else:
            raise AssertionError(f"{kwargs} was accepted")


@settings(max_examples=60, deadline=None)
@given(actions=st.lists(st.text(max_size=30), min_size=1, max_size=20), seed=st.text(max_size=12))
def test_arbitrary_text_never_raises_and_episodes_end_within_sixteen_answers(actions, seed):
    env, _ = GuessRoundsEnv().reset(seed)
    answers = 0
    for action in actions:
        if not env.alive:
            break
        env, delta = env.step(action)
        answers += 1
        assert isinstance(delta, str) and 0.0 <= env.reward <= 1.3 and 0.0 <= env.metrics()["success"] <= 1.0
    assert answers <= 16 and (env.alive or answers >= 4)
