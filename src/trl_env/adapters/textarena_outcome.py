"""Whether a finished TextArena game was a success for the model's seat, from the game's own outcome.

The reward alone cannot say: single-player games score partial progress (FrozenLake pays the share of
the way walked even when the player falls into a hole), so ``reward > 0`` is not a win. Instead:

- a game of two or more players is a success when the model's seat is the winner: its reward is above
  every other seat's (TextArena gives the winner +1 and the others -1; a draw gives all 0);
- a single-player game is a success when it ended with its win message (the end reason TextArena
  reports in ``close()``), per game in :data:`WIN_REASONS`, read from textarena 0.7.4's sources. A game
  without a win (Set only scores sets found) reports no success. A single-player game not in the table
  counts as a success when its reward is 1.0 (the score every 0.7.4 puzzle gives a solved game).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any


def _blackjack(reason: str) -> bool:
    """Blackjack's end reason counts the hands: a success is more hands won than the dealer's."""
    match = re.search(r"Dealer: (\d+), You: (\d+)", reason)
    return match is not None and int(match.group(2)) > int(match.group(1))


def _reason(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern)
    return lambda reason: compiled.search(reason) is not None


# Game class -> whether an end reason is the game's win; None: the game has no win.
WIN_REASONS: dict[str, Callable[[str], bool] | None] = {
    "Game2048Env": _reason(r"^Congratulations, you reached"),
    "BanditEnv": _reason(r"^Congratulations! You chose the correct button"),
    "BlackjackEnv": _blackjack,
    "CountdownEnv": _reason(r"^Perfect! Found exact target"),
    "CrosswordsEnv": _reason(r"^Congratulations! You completed the Crosswords puzzle"),
    "CryptarithmEnv": _reason(r"^Correct! Equation satisfied"),
    "FifteenPuzzleEnv": _reason(r"successfully solved the 15-Puzzle"),
    "FrozenLakeEnv": _reason(r"^Congratulations! You reached the goal"),
    "GuessTheNumberEnv": _reason(r"^Congratulations! You guessed the correct number"),
    "LightsOutEnv": _reason(r"^Congratulations! You solved the puzzle"),
    "LogicPuzzleEnv": _reason(r"has solved the logic puzzle"),
    "MastermindEnv": _reason(r"^You have cracked the code"),
    "MinesweeperEnv": _reason(r"^Congratulations! You have successfully cleared the Minesweeper board"),
    "PegJumpEnv": _reason(r"^Solved with one peg remaining"),
    "RushHourEnv": _reason(r"^Puzzle solved"),
    "SecretaryEnv": _reason(r"Perfect choice!"),
    "SetEnv": None,
    "SlitherlinkEnv": _reason(r"Puzzle solved!"),
    "SokobanEnv": _reason(r"^Congratulations! You have solved the Sokoban puzzle"),
    "SudokuEnv": _reason(r"completed the Sudoku puzzle"),
    "ThreeCardMonteEnv": _reason(r"^Correct! You found the ball"),
    "TowerOfHanoiEnv": _reason(r"^Congratulations! You solved the Tower of Hanoi puzzle"),
}


def has_win(game: str) -> bool:
    """Whether the game (by class name) has a win at all (Set does not)."""
    return not (game in WIN_REASONS and WIN_REASONS[game] is None)


def end_reason(game_info: Any, player_id: int) -> str:
    """The game's reason for ending, as ``close()`` reports it for the seat ('' when there is none)."""
    info = game_info.get(player_id, {}) if isinstance(game_info, dict) else {}
    reason = info.get("reason") if isinstance(info, dict) else None
    return str(reason) if reason else ""


def success_of(game: str, rewards: Any, game_info: Any, player_id: int) -> bool | None:
    """Whether the finished game is a success for ``player_id`` (None: the game has no win).

    Args:
        game: the game's class name, e.g. ``"FrozenLakeEnv"``.
        rewards: the rewards ``close()`` returned, by seat.
        game_info: the game info ``close()`` returned, by seat.
        player_id: the model's seat.

    Returns:
        True, False, or None for a game without a win.

    Example:
        >>> hole = {0: {"reason": "You fell into a hole! Game over. You completed 80% of the journey."}}
        >>> success_of("FrozenLakeEnv", {0: 0.8}, hole, 0)
        False
        >>> success_of("TicTacToeEnv", {0: 1, 1: -1}, {}, 0), success_of("TicTacToeEnv", {0: 0, 1: 0}, {}, 0)
        (True, False)
    """
    rewards = rewards if isinstance(rewards, dict) else {}
    mine = rewards.get(player_id)
    if not isinstance(mine, int | float):
        return False
    others = [value for seat, value in rewards.items() if seat != player_id and isinstance(value, int | float)]
    if others:
        return mine > max(others)
    info = game_info.get(player_id, {}) if isinstance(game_info, dict) else {}
    if isinstance(info, dict) and info.get("invalid_move"):
        return False
    if game not in WIN_REASONS:
        return mine == 1.0
    rule = WIN_REASONS[game]
    return None if rule is None else rule(end_reason(game_info, player_id))


def game_over_line(reason: str, delta: str) -> str:
    """The line that tells the model why the game ended, unless ``delta`` already says it ('' then)."""
    if not reason or reason.strip() in delta:
        return ""
    return f"Game over: {reason.strip()}"
