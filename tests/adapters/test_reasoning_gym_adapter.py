"""reasoning-gym adapter: seeds, tries, scoring, curricula, check_env and a real rollout."""

from __future__ import annotations

import pytest
from adapter_helpers import assert_episodes_ok, round_trip

from trl_env.adapters.reasoning_gym import ReasoningGymEnv, reasoning_gym_env
from trl_env.checks.env import check_env


def test_seeds_map_to_dataset_indices_modulo_size():
    factory = reasoning_gym_env("basic_arithmetic", size=20)
    first = {seed: factory().reset(seed)[1] for seed in ["17", "train-17", "eval/37", "3"]}
    assert first["17"] == first["train-17"] == first["eval/37"]  # 37 mod 20 = 17
    assert first["17"] != first["3"]
    assert factory().reset("no-number-a")[1] == factory().reset("no-number-a")[1]  # hashed, stable


def test_wrong_answers_then_out_of_tries():
    env, _ = reasoning_gym_env("basic_arithmetic", size=10, max_tries=2)().reset("1")
    env, reply = env.step("not a number")
    assert (reply, env.alive, env.reward) == ("That is not correct. You have 1 try left.", True, 0.0)
    env, reply = env.step("still wrong")
    expected = env.entry["answer"]
    assert reply == f"That is not correct. The expected answer was: {expected}" and not env.alive
    assert env.metrics() == {"success": 0.0, "tries": 2.0, "best_score": 0.0}
    assert env.step(expected)[1] == "The episode is over." and env.reward == 0.0


def test_right_answer_on_a_later_try_with_discount_and_answer_tag():
    factory = reasoning_gym_env("basic_arithmetic", size=10, max_tries=3, retry_discount=0.5, answer_tag="answer")
    env, _ = factory().reset("4")
    answer = env.entry["answer"]
    env, _ = env.step(f"<answer>{answer}</answer>x")
    assert env.reward == 1.0 and not env.alive
    env, _ = factory().reset("4")
    env, _ = env.step(answer)  # no tag: an empty answer
    env, reply = env.step(f"thinking... <answer>0</answer> no wait <answer>{answer}</answer>")
    assert reply == "Correct!" and env.reward == 0.5 and env.metrics()["success"] == 1.0


def test_a_scorer_that_raises_on_junk_scores_zero():
    env, _ = reasoning_gym_env("prime_factorization", size=10)().reset("2")
    env, reply = env.step("zzz")  # reasoning-gym 0.1.25's scorer raises ValueError here
    assert env.reward == 0.0 and reply.startswith("That is not correct")


def test_curriculum_levels_through_the_seed():
    factory = reasoning_gym_env("basic_arithmetic", size=100)
    easy = [factory().reset(f"level0-{i}")[1] for i in range(5)]
    hard = [factory().reset(f"train-level5-{i}")[1] for i in range(5)]
    assert sum(len(q) for q in hard) > sum(len(q) for q in easy)  # more terms and digits at level 5
    assert factory().reset("level5-3")[1] == hard[3]
    with pytest.raises(ValueError, match="has no curriculum"):
        ReasoningGymEnv("acre").reset("level1-0")


def test_bad_options_fail_when_the_factory_is_made():
    with pytest.raises(ValueError, match="unknown dataset 'nope'"):
        reasoning_gym_env("nope")
    with pytest.raises(ValueError, match="rejects"):
        reasoning_gym_env("basic_arithmetic", min_terms=5, max_terms=2)
    with pytest.raises(ValueError, match="max_tries"):
        reasoning_gym_env("basic_arithmetic", max_tries=0)


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("mazes", "'maze'"),
        ("basic_arith", "'basic_arithmetic'"),
        ("sudoko", "'sudoku' or 'sokoban'"),
        ("Maze", "'maze'"),
    ],
)
def test_an_unknown_dataset_suggests_the_closest_names(typo, suggestion):
    with pytest.raises(ValueError, match=f"unknown dataset '{typo}'; did you mean {suggestion}\\? ") as raised:
        reasoning_gym_env(typo)
    assert "reasoning_gym.factory.DATASETS" in str(raised.value) and "'ab'" not in str(raised.value)


@pytest.mark.parametrize("dataset", ["basic_arithmetic", "leg_counting", "prime_factorization", "word_sorting"])
def test_check_env_passes(dataset):
    report = check_env(round_trip(reasoning_gym_env(dataset, size=50)))
    assert report.ok, report.table()


def test_rollout_with_the_tiny_model(tiny_rollout):
    seeds = [f"train-{i}" for i in range(4)]
    episodes = tiny_rollout(reasoning_gym_env("basic_arithmetic", size=50, max_tries=2), seeds)
    assert_episodes_ok(episodes, seeds, 0.0, 1.0)


def test_trains_a_step_from_the_command_line(train_one_step):
    train_one_step("trl_env.adapters.reasoning_gym:reasoning_gym_env", '{"dataset": "leg_counting", "size": 10}')
