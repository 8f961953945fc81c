"""All adapters: docstring examples run, factories pickle, and the CLI's ``--env``/``--env-kwargs`` route works."""

from __future__ import annotations

import doctest
import importlib
import json
import pickle

import pytest

from trl_env.adapters import ADAPTERS
from trl_env.adapters.seeds import resolve

pytestmark = pytest.mark.filterwarnings("ignore::jericho.jericho.UnsupportedGameWarning")
MODULES = [
    "trl_env.adapters",
    "trl_env.adapters.seeds",
    "trl_env.adapters.actions",
    "trl_env.adapters.reasoning_gym",
    "trl_env.adapters.textarena",
    "trl_env.adapters.textworld",
    "trl_env.adapters.openenv",
    "examples.adapters.reasoning_gym_example",
    "examples.adapters.textarena_example",
    "examples.adapters.textworld_example",
    "examples.adapters.openenv_example",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize(
    ("spec", "kwargs", "seed", "first_words"),
    [
        (ADAPTERS["reasoning_gym"], '{"dataset": "leg_counting", "size": 10}', "3", "Your task is to count"),
        (ADAPTERS["textarena"], '{"game_id": "TicTacToe-v0", "opponent": '
         '"trl_env.adapters.textarena:random_move_opponent"}', "0", "You are Player 0 in Tic Tac Toe."),
    ],
)  # fmt: skip
def test_cli_spec_and_json_kwargs_give_a_picklable_factory(spec, kwargs, seed, first_words):
    """``--env MODULE:FUNCTION --env-kwargs JSON``: the function called with the JSON's keys builds the factory."""
    factory = resolve(spec, "--env")(**json.loads(kwargs))
    env, delta = pickle.loads(pickle.dumps(factory))().reset(seed)
    assert delta.startswith(first_words) and env.alive
    assert set(env.metrics()) and all(isinstance(v, float) for v in env.metrics().values())
    env.close()
