"""TextWorld adapter: locally compiled games, the game cache, score rewards, odd actions, check_env and a rollout."""

from __future__ import annotations

import json

import pytest
import textworld
import torch
from adapter_helpers import assert_episodes_ok, round_trip

from trl_env import ChatTemplateProcessor, TransformersGenerator, rollout
from trl_env.adapters.textworld import clean_feedback, game_file, textworld_env
from trl_env.checks.env import check_env
from trl_env.testing import build_tiny_qwen3_model
from trl_env.testing.scripted_model import script_model

OPTIONS = {"world_size": 3, "nb_objects": 5, "quest_length": 3}
pytestmark = pytest.mark.filterwarnings("ignore::jericho.jericho.UnsupportedGameWarning")  # harmless, see the adapter


@pytest.fixture(scope="session")
def tw_cache(tmp_path_factory):
    """A game cache with games 0 and 1 of OPTIONS compiled once for the whole session."""
    cache = tmp_path_factory.mktemp("textworld")
    for n in (0, 1):
        game_file({"nb_rooms": 3, "nb_objects": 5, "quest_length": 3}, n, cache)
    return str(cache)


@pytest.fixture
def factory(tw_cache):
    return textworld_env(**OPTIONS, num_games=2, cache_dir=tw_cache)


def walkthrough(path) -> list[str]:
    env = textworld.start(str(path), request_infos=textworld.EnvInfos(extras=["walkthrough"]))
    try:
        return env.reset()["extra.walkthrough"]
    finally:
        env.close()


def test_the_walkthrough_wins_with_reward_one(factory, tw_cache):
    commands = walkthrough(game_file({"nb_rooms": 3, "nb_objects": 5, "quest_length": 3}, 1, tw_cache))
    env, delta = factory().reset("train-1")
    assert "TextWorld" in delta and "$$" not in delta  # the objective, without the title art
    rewards = []
    for command in commands:
        env, delta = env.step(command)
        rewards.append(env.reward)
    assert rewards[-1] == 1.0 and not env.alive and rewards == sorted(rewards)  # the score only grows
    assert env.metrics()["success"] == 1.0 and env._game is None  # the interpreter was stopped at the end
    assert env.step("look")[1] == "The game is over."


def test_seeds_pick_games_from_the_pool(factory):
    first = {seed: factory().reset(seed)[1] for seed in ("0", "1", "train-2", "eval-3")}
    assert first["0"] == first["train-2"] and first["1"] == first["eval-3"] and first["0"] != first["1"]


def test_games_are_compiled_once_and_keyed_by_options(tw_cache):
    options = {"nb_rooms": 3, "nb_objects": 5, "quest_length": 3}
    path = game_file(options, 0, tw_cache)
    stamp = path.stat().st_mtime_ns
    assert game_file(options, 0, tw_cache) == path and path.stat().st_mtime_ns == stamp
    assert path.with_suffix(".json").exists()
    other = game_file({**options, "nb_rooms": 2}, 0, tw_cache)
    assert other.parent != path.parent and other.exists()


def test_admissible_commands_and_unknown_commands(tw_cache):
    env, delta = textworld_env(**OPTIONS, num_games=2, cache_dir=tw_cache, admissible_commands=True)().reset("0")
    assert "\n\nAdmissible commands: " in delta and "inventory" in delta.rsplit("Admissible commands: ", 1)[1]
    env, delta = env.step("xyzzy\nlook")  # one line: newlines do not smuggle in a second command
    assert delta.startswith("That's not a verb I recognise.") and env.alive and env.reward == 0.0


def test_max_steps_and_metrics(tw_cache):
    env, _ = textworld_env(**OPTIONS, num_games=2, cache_dir=tw_cache, max_steps=2)().reset("0")
    env, _ = env.step("look")
    assert env.alive
    env, _ = env.step("look")
    assert not env.alive and env.metrics() == {"success": 0.0, "score": 0.0, "max_score": env.max_score, "steps": 2.0}


ODD_ACTIONS = {
    "escape codes": "\x1b[31mlook\x1b[0m",
    "other controls": "\x01\x7f\x9binventory\x08",
    "lone surrogate": "look \ud800",
    "surrogate pair": "\ud83d\ude00 look",
    "very long": "look " + "x" * 20_000,
    "multi-byte at the cut": "look " + "é" * 200,
}


@pytest.mark.parametrize("action", ODD_ACTIONS.values(), ids=ODD_ACTIONS.keys())
def test_odd_actions_get_an_answer_and_the_game_goes_on(factory, action):
    env, _ = factory().reset("0")
    env, delta = env.step(action)
    assert delta and env.alive and env.steps == 1
    env, delta = env.step("inventory")
    assert delta == "You are carrying nothing."


@pytest.mark.parametrize("isolation", ["process", "thread"])
def test_a_nul_byte_in_the_models_action_does_not_crash_the_interpreter(qwen3_tokenizer, factory, isolation):
    # Byte-level vocabularies have a token for the NUL byte, so a sampling model can write one. frotz read
    # the command as a C string ending at the NUL, never saw its newline and died of SIGSEGV (or SIGBUS):
    # a lost worker under process isolation, the whole training run under thread isolation.
    model = script_model(build_tiny_qwen3_model(qwen3_tokenizer), qwen3_tokenizer, "take \x00 key")
    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = TransformersGenerator(model, qwen3_tokenizer, stop_token_ids=[stop])
    with torch.no_grad():
        episodes = rollout(factory, ["0", "1"], generator, ChatTemplateProcessor(qwen3_tokenizer), max_turns=2,
                           max_turn_tokens=16, env_isolation=isolation, env_timeout=30)  # fmt: skip
    for episode in episodes:
        assert episode.error is None, episode.error
        assert [turn.action for turn in episode.turns] == ["take \x00 key"] * 2  # the model did write the NUL
        assert "You can't see any such thing." in episode.turns[0].observation


def test_clean_feedback_strips_prompt_and_status_bar():
    assert clean_feedback("\nTaken.\n\n>          -= Attic =-1/5") == "Taken."
    assert clean_feedback("plain") == "plain"


def test_bad_options_fail_clearly():
    with pytest.raises(ValueError, match="quest_length must be an integer >= 1, got 0"):
        textworld_env(quest_length=0)


def test_check_env_passes(factory):
    report = check_env(round_trip(factory))
    assert report.ok, report.table()


def test_rollout_with_the_tiny_model(factory, tiny_rollout):
    seeds = ["train-0", "train-1", "train-0"]
    episodes = tiny_rollout(factory, seeds)
    assert_episodes_ok(episodes, seeds, 0.0, 1.0)


def test_trains_a_step_from_the_command_line(train_one_step, tw_cache):
    kwargs = json.dumps({**OPTIONS, "num_games": 2, "cache_dir": tw_cache})
    train_one_step("trl_env.adapters.textworld:textworld_env", kwargs)
