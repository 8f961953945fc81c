"""Legal moves of a TextArena game's current position, judged by the game itself.

Candidates come from the game's own state where it holds them (Nim's piles) and
otherwise from the bracketed moves in the text the seat to move was shown (``'[2, 3]'``, ``[4]``).
Each candidate is then tried on a deep copy of the game; it is legal when the game takes it
without flagging an invalid move. So a stale move list, an echoed move of the other player or a
prompt's example never counts: only what the game accepts in the position it is in now.
"""

from __future__ import annotations

import copy
import itertools
import math
import random
import re
from collections.abc import Callable
from typing import Any

import textarena

_BRACKETED = re.compile(r"\[[^\[\]\n]{1,40}\]")
# The variable parts of a move a prompt gives as an example or a template: a number ("[col 4]", "[swap X Y]",
# "[<number>]") or a board square ("[a4]"). A move is expanded over their values when that makes few moves.
_SLOT = re.compile(r"(?<![A-Za-z0-9])(?:[a-j][0-9]|[0-9]+|[A-Z]|<[^<>]+>)(?![A-Za-z0-9])")
_MAX_EXPANSION = 400


def _values(slot: str, slots: int) -> list[str]:
    if len(slot) == 2 and slot[0].islower():
        return [f"{letter}{digit}" for letter in "abcdefghij" for digit in range(10)]
    return [str(number) for number in range(21 if slots == 1 else 10)]


def _expanded(move: str) -> list[str]:
    """``move`` with every combination of values in its slots (just ``move`` when there would be too many)."""
    parts = _SLOT.split(move)
    slots = _SLOT.findall(move)
    choices = [_values(slot, len(slots)) for slot in slots]
    if not slots or math.prod(len(values) for values in choices) > _MAX_EXPANSION:
        return [move]
    out = [parts[0]]
    for values, tail in zip(choices, parts[1:], strict=True):
        out = [f"{head}{value}{tail}" for head in out for value in values]
    return [move, *out]


def _unwrapped(game: Any) -> Any:
    """The game under TextArena's wrappers."""
    while isinstance(game, textarena.Wrapper):
        game = game.env
    return game


def _nim_moves(game: Any) -> list[str]:
    piles = game.state.game_state["piles"]
    return [f"[{index} {count}]" for index, size in enumerate(piles) for count in range(1, size + 1)]


# Games whose state holds the move space, by class name; every other game's candidates are read from the text.
_FROM_STATE: dict[str, Callable[[Any], list[str]]] = {"NimEnv": _nim_moves}


def game_class(game: Any) -> str:
    """The class name of the game under its wrappers, e.g. ``"OthelloEnv"``."""
    return type(_unwrapped(game)).__name__


def candidate_moves(game: Any, observation: str) -> tuple[list[str], list[str]]:
    """Moves to try: the listed ones, then variants to try when no listed one is legal.

    Listed: from the game's state where it holds them, else the bracketed moves in ``observation``.
    Variants: those moves over the values of their slots (a prompt's ``[col 4]`` as ``[col 0]`` ...
    ``[col 20]``, ``[a4]`` over the squares a0-j9), for games that give only an example or a template.

    Args:
        game: a TextArena game (wrapped or not).
        observation: the text the seat to move was shown during the game.

    Returns:
        ``(listed, variants)``: distinct moves, in the order found.
    """
    from_state = _FROM_STATE.get(game_class(game))
    if from_state is not None:
        return list(dict.fromkeys(from_state(_unwrapped(game)))), []
    listed = list(dict.fromkeys(_BRACKETED.findall(observation)))
    seen = set(listed)
    # Interleaved, so that every template has variants among the first _MAX_EXPANSION tried.
    mixed = itertools.chain.from_iterable(itertools.zip_longest(*(_expanded(found)[1:] for found in listed)))
    variants = [move for move in dict.fromkeys(mixed) if move is not None and move not in seen]
    return listed, variants[:_MAX_EXPANSION]


def is_legal(game: Any, move: str) -> bool:
    """Whether the game takes ``move`` from the seat to move without flagging it invalid (tried on a copy).

    Python's global ``random`` is restored afterwards, so trying moves does not change the game's draws.

    Args:
        game: a TextArena game in play.
        move: the move text.

    Returns:
        True when the move is legal in the current position.
    """
    outer = random.getstate()
    try:
        live = game.state  # the message logs grow all game and a trial move needs none of them
        memo = {id(live.logs): [], id(live.observations): {seat: [] for seat in live.observations}}
        trial = copy.deepcopy(game, memo)
        state = trial.state
        pid, errors = state.current_player_id, getattr(state, "error_count", 0)
        trial.step(move)
        flagged = bool(state.game_info.get(pid, {}).get("invalid_move"))
        return not flagged and getattr(state, "error_count", 0) <= errors
    except Exception:  # a move the game cannot even parse is not a legal one
        return False
    finally:
        random.setstate(outer)


def legal_moves(game: Any, observation: str, history: str = "") -> list[str]:
    """The legal moves of the seat to move, in the current position.

    The candidates of the seat's latest text are tried first (a game that lists the moves of each turn
    lists them there), then those of its whole game (a prompt's template), then their variants.

    Args:
        game: a TextArena game in play.
        observation: the text the seat to move was shown since its last move.
        history: all the text the seat was shown during the game.

    Returns:
        The legal moves of the first of those tiers that has any (possibly none).

    Example:
        >>> from trl_env.adapters.textarena import TextArenaEnv, random_move_opponent
        >>> env, delta = TextArenaEnv("Nim-v0", opponent=random_move_opponent).reset("1")
        >>> legal_moves(env.game, delta)[:3]
        ['[0 1]', '[0 2]', '[0 3]']
    """
    latest, _ = candidate_moves(game, observation)
    listed, variants = candidate_moves(game, history or observation)
    for tier in (latest, [move for move in listed if move not in latest], variants):
        legal = [move for move in tier if is_legal(game, move)]
        if legal:
            return legal
    return []
