"""TextArena's games as the adapter uses them: which run offline, and how one is made.

Example:
    >>> "Othello-v0" in OFFLINE_TWO_PLAYER, class_name("Othello-v0")
    (True, 'OthelloEnv')
"""

from __future__ import annotations

import importlib
from typing import Any

import textarena
from textarena.envs.registration import ENV_REGISTRY

# Measured with textarena 0.7.4 on Python 3.11, offline: every game of these ids (and their
# registered variants, e.g. "-hard") resets and plays without a download or an API key.
OFFLINE_SINGLE_PLAYER = [
    "2048-v0", "Bandit-v0", "Blackjack-v0", "Countdown-v0", "Crosswords-v0", "Cryptarithm-v0", "FifteenPuzzle-v0",
    "FrozenLake-v0", "GuessTheNumber-v0", "LightsOut-v0", "LogicPuzzle-v0", "Mastermind-v0", "Minesweeper-v0",
    "PegJump-v0", "RushHour-v0", "Secretary-v0", "Set-v0", "Slitherlink-v0", "Sokoban-v0", "Sudoku-v0",
    "ThreeCardMonte-v0", "TowerOfHanoi-v0",
]  # fmt: skip
OFFLINE_TWO_PLAYER = [
    "Alquerque-v0", "Battleship-v0", "Breakthrough-v0", "Briscola-v0", "Chopsticks-v0", "ColonelBlotto-v0",
    "ConnectFour-v0", "Crusade-v0", "GameOfPureStrategy-v0", "GermanWhist-v0", "Golf-v0", "HighSociety-v0",
    "IndianPoker-v0", "IteratedMatchingPennies-v0", "IteratedPrisonersDilemma-v0", "IteratedRockPaperScissors-v0",
    "IteratedTwoThirdsAverage-v0", "IteratedUltimatumGame-v0", "KuhnPoker-v0", "LinesOfAction-v0", "MemoryGame-v0",
    "NewRecruit-v0", "Nim-v0", "Othello-v0", "PigDice-v0", "SimpleBlindAuction-v0", "SimpleNegotiation-v0",
    "SimpleTak-v0", "Stratego-v0", "Tak-v0", "TicTacToe-v0", "TruthAndDeception-v0", "TwoDollar-v0",
    "UltimateTicTacToe-v0", "WildTicTacToe-v0", "LiarsDice-v0", "Poker-v0", "Snake-v0", "Surround-v0",
    "SantoriniBaseFixed-v0",
]  # fmt: skip


def class_name(game_id: str) -> str:
    """The class name of a registered game, e.g. ``"OthelloEnv"``."""
    entry = ENV_REGISTRY[game_id].entry_point
    return entry.rpartition(":")[2] if isinstance(entry, str) else entry.__name__


def make_game(game_id: str, env_kwargs: dict[str, Any], format_actions: bool) -> Any:
    """The game without TextArena's observation wrappers (they re-send the whole history every turn)."""
    spec = ENV_REGISTRY[game_id]
    entry = spec.entry_point
    if isinstance(entry, str):
        module_name, _, class_name = entry.partition(":")
        entry = getattr(importlib.import_module(module_name), class_name)
    game = entry(**{**spec.kwargs, **env_kwargs})
    return textarena.wrappers.ActionFormattingWrapper(game) if format_actions else game
