"""GuessNumberEnv: feedback text, malformed guesses, reward shaping, seeds."""

from __future__ import annotations

import pytest

from examples.guess_number import GuessNumberEnv, heldout_seeds, train_seeds
from examples.guess_number.env import secret_for_seed
from tests.examples.episodes import play

INVALID = "Invalid guess: answer with one number between 1 and 16."


def test_prompt_states_range_turns_and_answer_format():
    _, prompt = GuessNumberEnv().reset("3")
    assert "between 1 and 16" in prompt and "5 guesses" in prompt
    assert prompt.endswith("Answer with just the number, for example: 8")


def test_scripted_trajectory_feedback_counters_and_reward():
    env, _ = GuessNumberEnv().reset("11")
    expected = [  # action, delta, (turns, valid, consistent), reward, alive
        ("hello", INVALID, (1, 0, 0), 0.0, True),
        ("8", "Higher than 8.", (2, 1, 1), (0.1 * 1 + 0.2 * 1) / 2, True),
        ("4", "Higher than 4.", (3, 2, 1), (0.1 * 2 + 0.2 * 1) / 3, True),  # 4 < 9: inconsistent
        ("14", "Lower than 14.", (4, 3, 2), (0.1 * 3 + 0.2 * 2) / 4, True),
        ("I think 11.", "Correct! The number is 11.", (5, 4, 3), 1.0 + (0.1 * 4 + 0.2 * 3) / 5, False),
    ]
    for action, delta, counters, reward, alive in expected:
        env, got = env.step(action)
        assert got == delta
        assert (env.turns, env.valid_guesses, env.consistent_guesses) == counters
        assert env.reward == pytest.approx(reward) and env.alive is alive
    assert env.solved and env.reward == 1.2


def test_perfect_binary_search_scores_maximum():
    env, deltas = play(GuessNumberEnv(), "13", ["8", "12", "14", "13"])
    assert deltas == ["Higher than 8.", "Higher than 12.", "Lower than 14.", "Correct! The number is 13."]
    assert env.reward == 1.3 and env.alive is False


def test_repeating_an_excluded_guess_is_inconsistent():
    env, _ = play(GuessNumberEnv(), "11", ["8", "8"])
    assert (env.valid_guesses, env.consistent_guesses) == (2, 1)
    env, _ = play(GuessNumberEnv(), "3", ["8", "9"])  # 9 is excluded by "Lower than 8."
    assert (env.valid_guesses, env.consistent_guesses) == (2, 1)


def test_out_of_turns_without_solving():
    env, deltas = play(GuessNumberEnv(max_turns=2), "16", ["1", "2"])
    assert deltas == ["Higher than 1.", "Higher than 2."]
    assert env.alive is False and not env.solved and env.reward == pytest.approx(0.1 + 0.2)
    env, delta = env.step("16")
    assert delta == "The episode is over." and env.turns == 2 and not env.solved


@pytest.mark.parametrize("action", ["", "   ", "abc", "eight", "0", "17", "-3", "9" * 5000, "+-", "１２"])
def test_malformed_guesses_count_as_turns(action):
    env, deltas = play(GuessNumberEnv(), "5", [action])
    assert deltas == [INVALID]
    assert (env.turns, env.valid_guesses, env.consistent_guesses) == (1, 0, 0)
    assert env.alive is True and env.reward == 0.0


@pytest.mark.parametrize(
    ("action", "guess"),
    [("8", 8), (" 8 \n", 8), ("My guess: 12", 12), ("8.5", 8), ("**10**", 10), ("+3", 3), ("guess-7", 7)],
)
def test_first_integer_is_the_guess(action, guess):
    env, deltas = play(GuessNumberEnv(), "16", [action])
    assert deltas == [f"Higher than {guess}."] and env.valid_guesses == 1


def test_custom_range():
    env, prompt = GuessNumberEnv(low=-5, high=5, max_turns=3).reset("-2")
    assert env.secret == -2 and "between -5 and 5" in prompt
    env, delta = env.step("-4")
    assert delta == "Higher than -4."
    with pytest.raises(ValueError):
        GuessNumberEnv(low=3, high=2)
    with pytest.raises(ValueError):
        GuessNumberEnv(max_turns=0)


def test_secret_for_seed():
    assert [secret_for_seed(str(n), 1, 16) for n in range(1, 17)] == list(range(1, 17))
    assert secret_for_seed(" 7 ", 1, 16) == 7
    for seed in ["0", "17", "train-x", "", "ünïcode"]:
        value = secret_for_seed(seed, 1, 16)
        assert 1 <= value <= 16 and value == secret_for_seed(seed, 1, 16)
    assert len({secret_for_seed(f"s{i}", 1, 16) for i in range(200)}) == 16


def test_seed_lists():
    train = train_seeds(500, rng_seed=0)
    assert len(set(train)) == 500 and train == train_seeds(500, rng_seed=0)
    assert train_seeds(10, rng_seed=1) != train[:10]
    assert train_seeds(10, rng_seed=0) == train[:10]
    held = heldout_seeds(100)
    assert len(set(held)) == 100 and not set(held) & set(train)
    assert len({secret_for_seed(s, 1, 16) for s in held}) == 16
