"""TextArena adapter: single-player games, and two-player games against a fixed opponent policy.

The trained model plays ``player_id``; every other seat is played by ``opponent``, a callable
``str -> str`` that gets the text its seat observed since its last move and returns a move
(or a ``"module:function"`` string naming one, for the CLI). :func:`random_move_opponent`
plays a uniformly random move among those a board game lists as ``'[4]', '[5]'``.

Deltas are the game's own messages since the model's last move, one per line: game text
as is, other players' moves as ``[Player 1] [4]`` (the model's own move is not echoed).

Seeds: the game's integer seed is :func:`~trl_env.adapters.seeds.seed_index` of the seed.
TextArena seeds Python's *global* ``random`` and draws from it during play, which threads
running many games would interleave; each env therefore keeps its own ``random`` state and
swaps it in around each game call under a lock, so an episode depends on its seed alone.

Example:
    >>> factory = textarena_env("TicTacToe-v0", opponent=random_move_opponent)
    >>> env, delta = factory().reset("7")
    >>> print(delta.splitlines()[0])
    You are Player 0 in Tic Tac Toe.
    >>> env, delta = env.step("[4]")
    >>> print(delta.splitlines()[0])
    Player 0 placed their symbol (O) in cell 4.
    >>> env.alive, env.reward
    (True, 0.0)
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import math
import random
import re
import threading
from collections.abc import Callable
from typing import Any

import textarena
from textarena.envs.registration import ENV_REGISTRY

from trl_env.adapters.seeds import resolve, seed_index
from trl_env.errors import BackendError, ConfigError

_RANDOM_LOCK = threading.Lock()  # guards Python's global random while a game runs
_QUOTED_MOVE = re.compile(r"'(\[[^\[\]']{1,40}\])'")
GAME_ID = textarena.GAME_ID
PLAYER_ACTION = textarena.ObservationType.PLAYER_ACTION

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


def random_move_opponent(observation: str) -> str:
    """A uniformly random move among the quoted ``'[move]'`` options in ``observation``, else ``"[0]"``.

    The choice is a function of the observation text (a SHA-256 of it), so episodes stay
    reproducible without any opponent state.

    Args:
        observation: what the opponent's seat saw since its last move.

    Returns:
        A move string such as ``"[4]"``.

    Example:
        >>> random_move_opponent("Available Moves: '[1]', '[2]'") in ("[1]", "[2]")
        True
        >>> random_move_opponent("no moves listed")
        '[0]'
    """
    moves = _QUOTED_MOVE.findall(observation)
    if not moves:
        return "[0]"
    digest = hashlib.sha256(observation.encode("utf-8")).digest()
    return moves[int.from_bytes(digest[:8], "big") % len(moves)]


def _make_game(game_id: str, env_kwargs: dict[str, Any], format_actions: bool) -> Any:
    """The game without TextArena's observation wrappers (they re-send the whole history every turn)."""
    spec = ENV_REGISTRY[game_id]
    entry = spec.entry_point
    if isinstance(entry, str):
        module_name, _, class_name = entry.partition(":")
        entry = getattr(importlib.import_module(module_name), class_name)
    game = entry(**{**spec.kwargs, **env_kwargs})
    return textarena.wrappers.ActionFormattingWrapper(game) if format_actions else game


class TextArenaEnv:
    """One TextArena game; the model plays ``player_id``, ``opponent`` plays the other seats.

    Reward: 0.0 until the game ends, then the game's reward for the model's seat: in 0.7.4 two-player
    games give +1 (win), 0 (draw) and -1 (loss or too many invalid moves); single-player ones give
    a score, mostly in [-1, 1] (e.g. 2048: progress to the target tile; an invalid move: -1). A
    non-numeric reward (some games in 0.7.4 store their error message there by mistake) counts as -1.
    The episode also ends after ``max_steps`` model moves (reward 0.0, ``metrics()["truncated"]`` 1.0).

    Args:
        game_id: a TextArena id, e.g. ``"TicTacToe-v0"``.
        opponent: ``None`` for single-player games, else a callable ``str -> str`` or a
            ``"module:function"`` string.
        player_id: the model's seat.
        num_players: players in the game (default: 1 without an opponent, else 2).
        format_actions: wrap an action in ``[...]`` when it has no brackets (TextArena's
            ``ActionFormattingWrapper``).
        max_steps: the most model moves in an episode.
        max_action_chars: actions are cut to this many characters (some games echo the action, and
            some parse it with regular expressions that take minutes on a megabyte).
        env_kwargs: keyword arguments of the game's class, over its registered ones.
    """

    def __init__(
        self,
        game_id: str,
        *,
        opponent: Callable[[str], str] | str | None = None,
        player_id: int = 0,
        num_players: int | None = None,
        format_actions: bool = True,
        max_steps: int = 50,
        max_action_chars: int = 2000,
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.game_id, self.player_id, self.format_actions, self.max_steps = (
            game_id,
            player_id,
            format_actions,
            max_steps,
        )
        self.max_action_chars = max_action_chars
        self.opponent = resolve(opponent, "textarena_env opponent") if opponent is not None else None
        self.num_players = num_players if num_players is not None else (1 if opponent is None else 2)
        self.env_kwargs = dict(env_kwargs or {})
        self.reward, self.alive, self.steps, self.truncated = 0.0, False, 0, False
        self._game: Any = None
        self._random_state: Any = None

    def _call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run a game call with this episode's own global-random state swapped in."""
        with _RANDOM_LOCK:
            outer = random.getstate()
            if self._random_state is not None:
                random.setstate(self._random_state)
            try:
                return method(*args, **kwargs)
            finally:
                self._random_state = random.getstate()
                random.setstate(outer)

    def _render(self, pid: int, observations: list[tuple[int, str, Any]]) -> str:
        roles = getattr(self._game.state, "role_mapping", {}) or {}
        lines = []
        for sender, message, kind in observations:
            if sender == pid and kind == PLAYER_ACTION:
                continue  # the player knows its own move
            lines.append(str(message) if sender == GAME_ID else f"[{roles.get(sender, f'Player {sender}')}] {message}")
        return "\n".join(lines)

    def _advance(self, done: bool) -> str:
        """Let the opponent seats move until it is the model's turn or the game is over; the model's delta."""
        while not done:
            pid, observations = self._game.get_observation()
            if pid == self.player_id:
                return self._render(pid, observations)
            if self.opponent is None:
                raise BackendError(f"{self.game_id}: seat {pid} is to move but textarena_env got no opponent")
            done, _ = self._call(self._game.step, str(self.opponent(self._render(pid, observations))))
        rewards, _ = self._game.close()
        leftover = self._game.state.observations.get(self.player_id, [])
        value = (rewards or {}).get(self.player_id, 0.0)
        self.reward = float(value) if isinstance(value, int | float) and math.isfinite(value) else -1.0
        self.alive = False
        return self._render(self.player_id, leftover)

    def reset(self, seed: str) -> tuple[TextArenaEnv, str]:
        """Start the game with the seed's integer; the model's first delta (after the opponents' moves)."""
        self._game = _make_game(self.game_id, self.env_kwargs, self.format_actions)
        self._random_state = None
        self.reward, self.alive, self.steps, self.truncated = 0.0, True, 0, False
        self._call(self._game.reset, num_players=self.num_players, seed=seed_index(seed))
        return self, self._advance(False)

    def step(self, action: str) -> tuple[TextArenaEnv, str]:
        """Play the model's move, then the opponents' moves; the model's next delta."""
        if not self.alive:
            return self, "The game is over."
        self.steps += 1
        done, _ = self._call(self._game.step, action[: self.max_action_chars])
        delta = self._advance(done)
        if self.alive and self.steps >= self.max_steps:
            self.alive, self.truncated = False, True
            delta += f"\nThe game was stopped after {self.max_steps} moves."
        return self, delta

    def metrics(self) -> dict[str, float]:
        """``win`` (reward > 0 at the end), ``steps`` the model played and ``truncated``."""
        return {"win": float(not self.alive and self.reward > 0), "steps": float(self.steps),
                "truncated": float(self.truncated)}  # fmt: skip

    def close(self) -> None:
        """Drop the game."""
        self._game, self.alive = None, False


def textarena_env(
    game_id: str,
    *,
    opponent: Callable[[str], str] | str | None = None,
    player_id: int = 0,
    num_players: int | None = None,
    format_actions: bool = True,
    max_steps: int = 50,
    max_action_chars: int = 2000,
    env_kwargs: dict[str, Any] | None = None,
) -> Callable[[], TextArenaEnv]:
    """A factory of :class:`TextArenaEnv` (same arguments); the id and seats are checked here.

    Args:
        game_id, opponent, player_id, num_players, format_actions, max_steps, max_action_chars, env_kwargs:
            see :class:`TextArenaEnv`. Ids known to work offline: ``OFFLINE_SINGLE_PLAYER``
            and ``OFFLINE_TWO_PLAYER`` in this module.

    Returns:
        A picklable zero-argument callable returning a fresh env (picklable when ``opponent``
        is a module-level function or a ``"module:function"`` string).

    Example:
        >>> textarena_env("TicTacToe-v0")
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigError: textarena_env('TicTacToe-v0'): the game rejects 1 player(s) (The number of \
players has to be 2, received 1); pass opponent= for the other seats
    """
    if game_id not in ENV_REGISTRY:
        close = [i for i in ENV_REGISTRY if i.lower().startswith(game_id.lower()[:4])][:5]
        raise ConfigError(f"textarena_env: unknown game_id {game_id!r} (similar ids: {close})")
    env = TextArenaEnv(game_id, opponent=opponent, player_id=player_id, num_players=num_players,
                       format_actions=format_actions, max_steps=max_steps, max_action_chars=max_action_chars,
                       env_kwargs=env_kwargs)  # fmt: skip
    if not 0 <= player_id < env.num_players:
        raise ConfigError(f"textarena_env: player_id {player_id} is not a seat of a {env.num_players}-player game")
    try:  # one reset now, so that a game that needs a download or the wrong player count fails here
        env.reset("0")
    except (AssertionError, ValueError) as error:
        hint = "; pass opponent= for the other seats" if opponent is None else ""
        raise ConfigError(
            f"textarena_env({game_id!r}): the game rejects {env.num_players} player(s) ({error}){hint}"
        ) from error
    except Exception as error:
        raise BackendError(f"textarena_env({game_id!r}) cannot start here: {type(error).__name__}: {error}") from error
    return functools.partial(TextArenaEnv, game_id, opponent=opponent, player_id=player_id, num_players=num_players,
                             format_actions=format_actions, max_steps=max_steps, max_action_chars=max_action_chars,
                             env_kwargs=env_kwargs)  # fmt: skip
