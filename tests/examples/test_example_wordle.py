"""WordleEnv: per-letter feedback (repeated letters), parsing, reward, word list."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from examples.wordle import WORDS, WordleEnv, score_guess

INVALID = "Invalid guess: answer with one 5-letter word, e.g. CRANE."


@pytest.mark.parametrize(
    ("guess", "secret", "marks"),
    [  # each checked by hand
        ("CRANE", "CRANE", "GGGGG"),
        ("CRATE", "CRANE", "GGG.G"),
        ("PAPER", "APPLE", "YYGY."),  # two Ps in both: one green, one yellow
        ("FLOOR", "ROBOT", "..YGY"),  # second O green, first O yellow (ROBOT has two Os)
        ("EERIE", "ABIDE", "...YG"),  # one E in ABIDE, already green: the other Es are absent
        ("GEESE", "THOSE", "...GG"),
        ("ERASE", "SPEED", "Y..YY"),  # two Es in SPEED, both unplaced: both Es yellow
        ("EEEEE", "SPEED", "..GG."),  # greens use up both Es
        ("LLAMA", "HELLO", "YY..."),  # two Ls in HELLO, neither in place
        ("LEVEL", "HELLO", "YG..Y"),  # E green, so the second E is absent; HELLO's two Ls go to LEVEL's two Ls
        ("SPEED", "ERASE", "Y.YY."),  # ERASE has two Es, neither in place: both Es yellow
        ("ZZZZZ", "CRANE", "....."),
    ],
)
def test_score_guess_hand_checked(guess, secret, marks):
    assert score_guess(guess, secret) == marks
    assert score_guess(guess.lower(), secret) == marks


@given(st.text("ABE", min_size=5, max_size=5), st.text("ABE", min_size=5, max_size=5))
def test_score_guess_marks_each_letter_as_often_as_it_occurs(guess, secret):
    marks = score_guess(guess, secret)
    assert [m == "G" for m in marks] == [g == s for g, s in zip(guess, secret, strict=True)]
    for letter in set(guess):
        marked = sum(m != "." for g, m in zip(guess, marks, strict=True) if g == letter)
        assert marked == min(Counter(guess)[letter], Counter(secret)[letter])


def test_score_guess_rejects_length_mismatch():
    with pytest.raises(ValueError):
        score_guess("CAT", "CRANE")


def test_feedback_format_and_solving_reward():
    env, prompt = WordleEnv().reset("apple")
    assert env.secret == "APPLE" and "6 tries" in prompt and "for example: CRANE" in prompt
    env, delta = env.step("PAPER")
    assert delta == "PAPER -> Y Y G Y ." and env.alive and env.reward == 0.0
    env, delta = env.step("apple")
    assert delta == "APPLE -> G G G G G\nSolved in 2 guesses!"
    assert env.alive is False and env.solved and env.reward == pytest.approx(1 + 0.1 * 4 / 6)
    assert env.history == [("PAPER", "YYGY."), ("APPLE", "GGGGG")]


def test_solve_on_first_and_last_turn():
    env, _ = WordleEnv().reset("robot")
    env, delta = env.step("ROBOT")
    assert delta.endswith("Solved in 1 guess!") and env.reward == pytest.approx(1 + 0.1 * 5 / 6)
    env, _ = WordleEnv().reset("robot")
    for _ in range(5):
        env, _ = env.step("CRANE")
    env, _ = env.step("ROBOT")
    assert env.solved and env.reward == 1.0 and env.alive is False


def test_unsolved_episode_reveals_word_and_scores_zero():
    env, _ = WordleEnv(max_turns=2).reset("robot")
    env, delta = env.step("FLOOR")
    assert delta == "FLOOR -> . . Y G Y"
    env, delta = env.step("xyz")
    assert delta == INVALID + "\nOut of guesses. The word was ROBOT."
    assert env.alive is False and env.reward == 0.0 and env.turns == 2


@pytest.mark.parametrize(
    "action", ["", "CAT", "CRANES", "12345", "CR4NE", "my guess is crane", "CRANE or SLATE", "ÉCOLE"]
)
def test_invalid_guesses_use_a_turn(action):
    env, _ = WordleEnv().reset("robot")
    env, delta = env.step(action)
    assert delta == INVALID and env.turns == 1 and env.alive and env.history == []


@pytest.mark.parametrize(
    ("action", "guess"),
    [("crane", "CRANE"), (" Crane \n", "CRANE"), ("`CRANE`", "CRANE"), ('"crane".', "CRANE"),
     ("My guess: CRANE", "CRANE"), ("CRANE, CRANE!", "CRANE"), ("QXZJV", "QXZJV")],
)  # fmt: skip
def test_accepted_guesses(action, guess):
    env, _ = WordleEnv().reset("robot")
    env, delta = env.step(action)
    assert delta.startswith(f"{guess} -> ") and env.history[0][0] == guess


def test_word_list_and_custom_words():
    assert len(WORDS) >= 100 and len(set(WORDS)) == len(WORDS)
    assert all(len(w) == 5 and w.isascii() and w.isalpha() and w.isupper() for w in WORDS)
    env, prompt = WordleEnv(word_length=4, words=["tree", "Bird", "cat", "FISH"]).reset("any seed")
    assert env.words == ("BIRD", "FISH", "TREE") and env.secret in env.words and "4-letter" in prompt
    env, delta = env.step("BIRD")
    assert delta.startswith("BIRD -> ")
    with pytest.raises(ValueError):
        WordleEnv(word_length=7)
