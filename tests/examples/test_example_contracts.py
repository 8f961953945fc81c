"""Contracts shared by all example environments: types, termination, determinism, doctests."""

from __future__ import annotations

import doctest
import importlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from examples.discrete_log import DiscreteLogEnv
from examples.guess_number import GuessNumberEnv
from examples.guess_rounds import GuessRoundsEnv
from examples.wordle import WordleEnv
from trl_env.core import Env

CODE = "```python\nprint(sum(range(10)))\n```"
CASES = [  # (factory, seed, scripted actions, max_turns)
    (GuessNumberEnv, "train-0", ["8", "oops", "12", "3", "15", "9"], 5),
    (WordleEnv, "train-0", ["CRANE", "cat", "SLATE", "ghost", "12345", "PLANT", "TRAIN"], 6),
    (DiscreteLogEnv, "d2-train-0", ["hmm", CODE, "ANSWER:", "ANSWER: 3"], 4),
    (GuessRoundsEnv, "train-0", ["4", "oops", "6", "2", "7", "1", "8", "3", "5"] * 2, 16),
]
IDS = ["guess_number", "wordle", "discrete_log", "guess_rounds"]
MODULES = [
    "examples.guess_number.env",
    "examples.guess_number.seeds",
    "examples.wordle.env",
    "examples.discrete_log.env",
    "examples.discrete_log.problems",
    "examples.discrete_log.sandbox",
    "examples.discrete_log.seeds",
    "examples.vault_doors.env",
    "examples.guess_rounds.env",
]


def rollout(env, seed: str, actions: list[str]) -> list[tuple[str, float, bool]]:
    """Reset and play ``actions`` (until the episode ends), checking the protocol at each step."""
    env, delta = env.reset(seed)
    assert isinstance(env, Env) and isinstance(delta, str) and delta
    assert env.alive is True and env.reward == 0.0
    trace = [(delta, env.reward, env.alive)]
    for action in actions:
        if not env.alive:
            break
        env, delta = env.step(action)
        assert isinstance(env, Env) and isinstance(delta, str)
        assert isinstance(env.reward, float) and math.isfinite(env.reward)
        assert isinstance(env.alive, bool)
        trace.append((delta, env.reward, env.alive))
    return trace


@pytest.mark.parametrize(("factory", "seed", "actions", "max_turns"), CASES, ids=IDS)
def test_same_seed_same_trajectory(factory, seed, actions, max_turns):
    first = rollout(factory(), seed, actions)
    assert rollout(factory(), seed, actions) == first
    reused = factory()
    rollout(reused, "another-seed", actions)
    assert rollout(reused, seed, actions) == first  # reset fully clears the previous episode


@pytest.mark.parametrize(("factory", "seed", "actions", "max_turns"), CASES, ids=IDS)
def test_episode_ends_within_max_turns(factory, seed, actions, max_turns):
    env, _ = factory().reset(seed)
    steps = 0
    while env.alive:
        env, _ = env.step("no idea")
        steps += 1
        assert steps <= max_turns
    assert steps == max_turns and env.alive is False and env.reward == 0.0
    env, delta = env.step("8")  # stepping a finished episode is a harmless no-op
    assert delta == "The episode is over." and env.alive is False and env.reward == 0.0


def test_seeds_spread_over_problems():
    assert len({GuessNumberEnv().reset(f"seed-{i}")[0].secret for i in range(40)}) > 8
    assert len({WordleEnv().reset(f"seed-{i}")[0].secret for i in range(40)}) > 20
    assert len({DiscreteLogEnv().reset(f"d2-seed-{i}")[1] for i in range(40)}) > 20  # the prompt holds the problem


@settings(max_examples=60, deadline=None)
@given(actions=st.lists(st.text(max_size=80), min_size=1, max_size=8), seed=st.text(max_size=20))
def test_arbitrary_text_never_raises(actions, seed):
    for factory, max_turns in ((GuessNumberEnv, 5), (WordleEnv, 6), (DiscreteLogEnv, 4)):
        trace = rollout(factory(), f"d1-{seed}" if factory is DiscreteLogEnv else seed, actions)
        assert len(trace) - 1 <= max_turns
        if len(actions) >= max_turns:
            assert trace[-1][2] is False


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0
