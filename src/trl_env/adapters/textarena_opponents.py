"""Fixed opponents for two-player TextArena games.

An opponent is either a plain callable ``observation -> move`` (your own policy: it sees only the
text its seat was shown), or a :class:`LegalMovePolicy`, which the adapter also hands the legal moves
of the current position (see :mod:`trl_env.adapters.textarena_moves`). :data:`random_move_opponent`
is the built-in one; on the command line name it ``"random"``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from trl_env.adapters.seeds import resolve
from trl_env.errors import ConfigError

# Game classes in which scripts/textarena_opponent_survey.py measured that the adapter finds the legal moves
# of every position (no illegal move, no forfeit, no position without one, no endless turn, over seeded games;
# textarena 0.7.4; the rows are in benchmarks/out/textarena_opponent_survey.json).
LEGAL_MOVE_GAMES: frozenset[str] = frozenset(
    {
        "BattleshipEnv",
        "BriscolaEnv",
        "ChopsticksEnv",
        "ConnectFourEnv",
        "CrusadeEnv",
        "GameOfPureStrategyEnv",
        "GermanWhistEnv",
        "GolfEnv",
        "HighSocietyEnv",
        "IndianPokerEnv",
        "IteratedMatchingPenniesEnv",
        "IteratedPrisonersDilemmaEnv",
        "IteratedRockPaperScissorsEnv",
        "IteratedTwoThirdsAverageEnv",
        "IteratedUltimatumGameEnv",
        "KuhnPokerEnv",
        "LiarsDiceEnv",
        "MarketEntryGameEnv",
        "MemoryGameEnv",
        "NimEnv",
        "OthelloEnv",
        "PigDiceEnv",
        "PokerEnv",
        "PublicGoodsGameEnv",
        "QuantumTicTacToeEnv",
        "SimpleBlindAuctionEnv",
        "SimpleNegotiationEnv",
        "SimpleTakEnv",
        "SnakeEnv",
        "TicTacToeEnv",
    }
)


class LegalMovePolicy:
    """An opponent that chooses among the legal moves of the current position, which the adapter computes.

    Attributes:
        games: the game classes it may play (a game outside them is refused when the env is made);
            None: every game (to survey them).
    """

    games: frozenset[str] | None = LEGAL_MOVE_GAMES

    def __call__(self, observation: str, legal_moves: Sequence[str]) -> str:
        """The move to play.

        Args:
            observation: what the seat saw since its last move.
            legal_moves: the legal moves of the current position (never empty).

        Returns:
            One of ``legal_moves``.
        """
        raise NotImplementedError


class RandomLegalMove(LegalMovePolicy):
    """A uniformly random legal move, chosen by a SHA-256 of the observation (reproducible, no state).

    Example:
        >>> RandomLegalMove()("board", ["[1]", "[2]"]) in ("[1]", "[2]")
        True
    """

    def __call__(self, observation: str, legal_moves: Sequence[str]) -> str:
        digest = hashlib.sha256("\n".join([observation, *legal_moves]).encode("utf-8")).digest()
        return legal_moves[int.from_bytes(digest[:8], "big") % len(legal_moves)]

    def __repr__(self) -> str:
        return "random_move_opponent"


random_move_opponent = RandomLegalMove()

# Names a CLI user can pass as ``"opponent"`` in --env-kwargs.
OPPONENTS: dict[str, LegalMovePolicy] = {"random": random_move_opponent}


def check_game(opponent: object, game_id: str, game: str) -> None:
    """Refuse, before any episode, a game in which a :class:`LegalMovePolicy` cannot be offered legal moves.

    Args:
        opponent: the resolved opponent.
        game_id: the TextArena id, for the message.
        game: the game's class name.
    """
    games = getattr(opponent, "games", None) if isinstance(opponent, LegalMovePolicy) else None
    if games is not None and game not in games:
        raise ConfigError(
            f"textarena_env({game_id!r}): the built-in opponent cannot play this game (the adapter does not find "
            "its legal moves, so it would forfeit by illegal moves); pass your own opponent=, "
            "a 'module:function' string on the command line"
        )


def resolve_opponent(spec: Callable[..., str] | str) -> Callable[..., str]:
    """The opponent ``spec`` names: a built-in name (``"random"``), a ``"module:function"`` string, or itself.

    Args:
        spec: an opponent, or its name.

    Returns:
        The opponent callable.

    Example:
        >>> resolve_opponent("random") is random_move_opponent
        True
    """
    if isinstance(spec, str) and ":" not in spec:
        if spec not in OPPONENTS:
            raise ConfigError(
                f"textarena_env: unknown opponent {spec!r}; use one of {sorted(OPPONENTS)} "
                "or a 'module:function' string naming your own"
            )
        return OPPONENTS[spec]
    opponent: Any = resolve(spec, "textarena_env opponent")
    if not callable(opponent):
        raise ConfigError(f"textarena_env: opponent {spec!r} is not callable")
    return opponent
