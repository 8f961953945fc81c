"""TextArena adapter: single- and two-player games, opponents, rewards, determinism, check_env, a rollout."""

from __future__ import annotations

import random
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

import pytest
from adapter_helpers import assert_episodes_ok, round_trip

from trl_env.adapters.textarena import (
    LEGAL_MOVE_GAMES,
    OFFLINE_SINGLE_PLAYER,
    OFFLINE_TWO_PLAYER,
    RandomLegalMove,
    TextArenaEnv,
    class_name,
    random_move_opponent,
    textarena_env,
)
from trl_env.adapters.textarena_outcome import WIN_REASONS
from trl_env.checks.env import check_env

ROOT = Path(__file__).resolve().parents[2]


def center_then_corners(observation: str) -> str:
    """A fixed opponent: the first free cell of 4, 0, 2, 6, 8, 1, 3, 5, 7."""
    return next(f"[{c}]" for c in (4, 0, 2, 6, 8, 1, 3, 5, 7) if f"'[{c}]'" in observation)


def always_zero(observation: str) -> str:
    """An opponent of one's own, for games the built-in one cannot play."""
    return "[0]"


class CountingOpponent(RandomLegalMove):
    """The built-in opponent, counting its moves and the invalid-move notices the game sends its seat."""

    def __init__(self) -> None:
        self.moves, self.notices = 0, 0

    def __call__(self, observation: str, legal_moves: Sequence[str]) -> str:
        self.moves += 1
        self.notices += "attempted an invalid move" in observation
        return super().__call__(observation, legal_moves)


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
    assert env.reward == 1.0 and env.metrics()["success"] == 1.0
    assert delta.endswith("Game over: Congratulations! You guessed the correct number.")


def test_two_player_game_against_a_fixed_opponent():
    factory = textarena_env("TicTacToe-v0", opponent=center_then_corners, player_id=1)
    env, delta = factory().reset("0")
    assert "You are Player 1" in delta and "[Player 0] [4]" in delta  # the opponent opened in the center
    for move in ("[1]", "[3]", "[5]", "[7]"):  # lose: the opponent takes 0, 2, ... (never blocks our win)
        if env.alive:
            env, delta = env.step(move)
    assert not env.alive and env.reward == -1.0 and env.metrics()["success"] == 0.0
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
    with pytest.raises(ValueError, match="pass opponent=") as error:
        textarena_env("TicTacToe-v0")
    assert """--env-kwargs '{"game_id": "TicTacToe-v0", "opponent": "random"}'""" in str(error.value)  # for CLI users
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
        opponent = None
        if game_id in OFFLINE_TWO_PLAYER:  # the built-in opponent where it can play, else a fixed move
            opponent = random_move_opponent if class_name(game_id) in LEGAL_MOVE_GAMES else always_zero
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


@pytest.mark.parametrize("game_id", ["Othello-v0-tiny", "Nim-v0", "ConnectFour-v0", "Battleship-v0", "Chopsticks-v0"])
def test_the_random_opponent_plays_only_legal_moves(game_id):
    """Against a model playing random legal moves, over seeds, the opponent never plays an illegal move."""
    for seed in ("0", "1", "2"):
        opponent = CountingOpponent()
        env, _ = TextArenaEnv(game_id, opponent=opponent, max_steps=20).reset(seed)
        while env.alive:
            moves = env.legal_moves()
            assert moves, (game_id, seed)
            env, _ = env.step(moves[opponent.moves % len(moves)])
        assert opponent.moves >= 1 and opponent.notices == 0, (game_id, seed)
        assert not env.game.state.game_info[1].get("invalid_move"), (game_id, seed, env.end_reason)


@pytest.mark.parametrize("game_id", ["Othello-v0", "Nim-v0"])
def test_one_model_move_does_not_win_by_the_opponents_forfeit(game_id):
    for seed in ("0", "1", "2", "3"):
        env, _ = textarena_env(game_id, opponent="random")().reset(seed)
        env, delta = env.step(env.legal_moves()[0])
        assert env.alive and env.reward == 0.0 and "invalid move" not in delta, (game_id, seed, delta)


def test_games_the_opponent_cannot_play_are_refused_up_front():
    with pytest.raises(ValueError, match=r"textarena_env\('Breakthrough-v0'\): the built-in opponent cannot play"):
        textarena_env("Breakthrough-v0", opponent="random")
    with pytest.raises(ValueError, match="unknown opponent 'randm'; use one of \\['random'\\]"):
        textarena_env("TicTacToe-v0", opponent="randm")
    assert TextArenaEnv("Breakthrough-v0", opponent=always_zero).reset("0")[0].alive  # one's own opponent plays


def test_falling_into_a_hole_is_no_success_and_the_model_is_told_why():
    env, _ = textarena_env("FrozenLake-v0")().reset("1")
    for move in ("[right]", "[down]", "[right]", "[down]"):
        env, delta = env.step(move)
    assert not env.alive and 0.0 < env.reward < 1.0  # the game scores the way walked...
    assert env.metrics()["success"] == 0.0  # ...but it is no success
    assert delta.splitlines()[-1].startswith("Game over: You fell into a hole!")


def test_othellos_last_delta_says_how_the_game_ended():
    env, _ = textarena_env("Othello-v0-tiny", opponent="random")().reset("0")
    while env.alive:
        env, delta = env.step(env.legal_moves()[0])
    assert delta.splitlines()[-1] == "Game over: White wins 10-6." and env.metrics()["success"] == 0.0


def test_success_is_the_winner_of_a_two_player_game():
    env, _ = textarena_env("TicTacToe-v0", opponent=center_then_corners, player_id=1)().reset("0")
    for move in ("[0]", "[2]", "[6]", "[3]"):
        if env.alive:
            env, delta = env.step(move)
    assert env.reward == 1.0 and env.metrics()["success"] == 1.0  # the opponent (0, 2, 4...) let seat 1 win
    assert delta.splitlines()[-1].startswith("Game over: Player 1 has won")


def test_every_offline_single_player_game_has_its_win_reason_and_set_has_none():
    assert {class_name(game_id) for game_id in OFFLINE_SINGLE_PLAYER} <= set(WIN_REASONS)
    env, _ = textarena_env("Set-v0", max_steps=30)().reset("0")
    while env.alive:
        env, _ = env.step("[1, 2, 3]")
    assert env.steps == 20 and not env.truncated and "success" not in env.metrics()  # Set only scores sets
    assert "success" in textarena_env("Bandit-v0")().reset("0")[0].metrics()


def test_the_documented_command_runs(tiny_model_dir, capsys):
    """The TextArena command in docs/adapters.md, run as written (with the tiny model and a small budget)."""
    from trl_env.cli import main

    readme = (ROOT / "docs" / "adapters.md").read_text()
    command = re.search(r"trl-env eval --env trl_env\.adapters\.textarena:textarena_env[^`]*?--episodes \d+", readme)
    assert command is not None, "the TextArena command of docs/adapters.md is gone"
    argv = shlex.split(command.group(0).replace("\\\n", " "))[1:]
    argv[argv.index("--model") + 1] = str(tiny_model_dir)
    argv += ["--max-turns", "2", "--max-turn-tokens", "4", "--no-progress", "--json"]
    assert main(argv) == 0
    assert '"success_rate"' in capsys.readouterr().out


class AnyGameOpponent(RandomLegalMove):
    """The built-in opponent offered every game (as the survey does), to reach a game it is refused in."""

    games = None


def test_an_opponent_turn_that_never_ends_truncates_the_episode():
    """In Spite and Malice a random legal opponent can draw forever: the episode stops instead of hanging."""
    env, _ = TextArenaEnv("SpiteAndMalice-v0", opponent=AnyGameOpponent(), max_steps=40).reset("0")
    model = random.Random(0)
    while env.alive:
        env, delta = env.step(model.choice(env.legal_moves()))
    assert env.truncated and env.steps < 40 and delta == "The game was stopped: the opponent made 200 moves in a row."
    assert env.metrics()["success"] == 0.0


@pytest.mark.parametrize("game_id", ["TicTacToe-v0", "SimpleNegotiation-v0", "IteratedPrisonersDilemma-v0"])
def test_actions_with_lone_surrogates_and_control_characters_reach_the_game_cleaned(game_id):
    """These games echo the move into the opponent's view; a lone surrogate there raised UnicodeEncodeError."""
    env, _ = textarena_env(game_id, opponent="random")().reset("0")
    env, delta = env.step("[4]\ud800\x00\x1b[31m")
    assert isinstance(delta, str)
    delta.encode("utf-8")  # valid text for the tokenizer
