"""TextArena adapter: single- and two-player games, opponents, rewards, determinism, check_env, a rollout."""

from __future__ import annotations

import random

import pytest
from adapter_helpers import assert_episodes_ok, round_trip

from trl_env.adapters.textarena import (
    OFFLINE_SINGLE_PLAYER,
    OFFLINE_TWO_PLAYER,
    TextArenaEnv,
    random_move_opponent,
    textarena_env,
)
from trl_env.env_checker import check_env


def center_then_corners(observation: str) -> str:
    """A fixed opponent: the first free cell of 4, 0, 2, 6, 8, 1, 3, 5, 7."""
    return next(f"[{c}]" for c in (4, 0, 2, 6, 8, 1, 3, 5, 7) if f"'[{c}]'" in observation)


def test_single_player_game_to_the_end():
    factory = textarena_env("GuessTheNumber-v0")
    env, delta = factory().reset("5")
    assert "Guess The Number" in delta and env.alive
    low, high = 1, 20
    while env.alive:  # binary search on the game's "higher"/"lower" hints
        guess = (low + high) // 2
        env, delta = env.step(f"[{guess}]")
        if "higher" in delta:
            low = guess + 1
        elif "lower" in delta:
            high = guess - 1
    assert env.reward == 1.0 and env.metrics()["win"] == 1.0


def test_two_player_game_against_a_fixed_opponent():
    factory = textarena_env("TicTacToe-v0", opponent=center_then_corners, player_id=1)
    env, delta = factory().reset("0")
    assert "You are Player 1" in delta and "[Player 0] [4]" in delta  # the opponent opened in the center
    for move in ("[1]", "[3]", "[5]", "[7]"):  # lose: the opponent takes 0, 2, ... (never blocks our win)
        if env.alive:
            env, delta = env.step(move)
    assert not env.alive and env.reward == -1.0 and env.metrics()["win"] == 0.0
    assert env.step("[8]")[1] == "The game is over."


def test_invalid_moves_lose_and_the_model_seat_gets_its_reward():
    env, delta = textarena_env("TicTacToe-v0", opponent=random_move_opponent)().reset("3")
    env, delta = env.step("hello")  # one invalid move is allowed
    assert env.alive and "invalid move" in delta
    env, delta = env.step("hello")
    assert not env.alive and env.reward == -1.0


def test_opponent_from_a_module_function_string_and_pickling():
    factory = textarena_env("Nim-v0", opponent="trl_env.adapters.textarena:random_move_opponent")
    env, delta = round_trip(factory)().reset("1")
    assert "Nim" in delta and env.alive


def test_interleaved_episodes_do_not_share_global_random():
    """TextArena seeds and draws from Python's global random; two games stepped in turn must not mix streams."""
    factory = textarena_env("Minesweeper-v0")
    moves = ["[3 3]", "[0 0]", "[7 7]", "[5 2]"]

    def alone(seed: str) -> list[str]:
        env, delta = factory().reset(seed)
        return [delta] + [env.step(move)[1] for move in moves]

    expected = {seed: alone(seed) for seed in ("1", "2")}
    assert expected["1"] != expected["2"]
    envs = {seed: factory() for seed in ("1", "2")}
    got = {seed: [envs[seed].reset(seed)[1]] for seed in envs}
    for move in moves:
        for seed in envs:
            random.random()  # and other code draws from it meanwhile
            got[seed].append(envs[seed].step(move)[1])
    assert got == expected


def test_a_buggy_string_reward_counts_as_minus_one():
    env, _ = textarena_env("Countdown-v0")().reset("0")
    for _ in range(3):
        if env.alive:
            env, _ = env.step("not a move")
    assert not env.alive and env.reward == -1.0  # textarena 0.7.4 stores the error message as the reward


def test_max_steps_ends_a_long_game():
    env, _ = textarena_env("TicTacToe-v0", opponent=random_move_opponent, max_steps=1)().reset("2")
    env, delta = env.step("[4]")
    assert not env.alive and env.metrics()["truncated"] == 1.0 and "stopped after 1 moves" in delta


def test_bad_game_ids_and_seats_fail_clearly():
    with pytest.raises(ValueError, match="unknown game_id 'TicTacToe-v9'"):
        textarena_env("TicTacToe-v9")
    with pytest.raises(ValueError, match="pass opponent="):
        textarena_env("TicTacToe-v0")
    with pytest.raises(RuntimeError, match="cannot start here: LookupError"):  # needs an nltk download
        textarena_env("Wordle-v0")
    with pytest.raises(ValueError, match="player_id 2"):
        textarena_env("TicTacToe-v0", opponent=random_move_opponent, player_id=2)


@pytest.mark.parametrize(
    "game_id",
    ["GuessTheNumber-v0", "Mastermind-v0", "2048-v0", "TicTacToe-v0", "ConnectFour-v0", "KuhnPoker-v0", "Poker-v0"],
)
def test_check_env_passes(game_id):
    opponent = random_move_opponent if game_id in OFFLINE_TWO_PLAYER else None
    report = check_env(round_trip(textarena_env(game_id, opponent=opponent)))
    assert report.ok, report.table()


def test_every_listed_offline_game_starts_and_plays():
    for game_id in OFFLINE_SINGLE_PLAYER + OFFLINE_TWO_PLAYER:
        if game_id in ("RushHour-v0", "Sokoban-v0"):
            continue  # offline too (measured), but their puzzle generators take seconds per reset
        opponent = random_move_opponent if game_id in OFFLINE_TWO_PLAYER else None
        env = TextArenaEnv(game_id, opponent=opponent)
        env, delta = env.reset("0")
        assert delta and env.alive, game_id
        env, _ = env.step("[0]")
        assert -1.0 <= env.reward <= 1.0, (game_id, env.reward)


def test_rollout_with_the_tiny_model(tiny_rollout):
    seeds = ["train-0", "train-1", "train-2"]
    for factory in (textarena_env("GuessTheNumber-v0"), textarena_env("TicTacToe-v0", opponent=center_then_corners)):
        episodes = tiny_rollout(factory, seeds)
        assert_episodes_ok(episodes, seeds, -1.0, 1.0)


def test_trains_a_step_from_the_command_line(train_one_step):
    kwargs = '{"game_id": "TicTacToe-v0", "opponent": "trl_env.adapters.textarena:random_move_opponent"}'
    train_one_step("trl_env.adapters.textarena:textarena_env", kwargs)
