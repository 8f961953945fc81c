"""TextArena adapter: single-player games, and two-player games against a fixed opponent policy.

The trained model plays ``player_id``; every other seat is played by ``opponent``: ``"random"``
(:data:`random_move_opponent`, a uniformly random *legal* move of the current position, judged by the
game itself; the games it can play are listed in ``LEGAL_MOVE_GAMES``, others are refused when the env
is made), your own callable ``str -> str`` that gets the text its seat observed since its last move,
or a ``"module:function"`` string naming one (for the CLI). See :mod:`~trl_env.adapters.textarena_opponents`.

Deltas are the game's own messages since the model's last move, one per line: game text
as is, other players' moves as ``[Player 1] [4]`` (the model's own move is not echoed). The last
delta ends with the game's reason for ending (``Game over: You fell into a hole! ...``) unless the
game already said it.

Metrics: ``success`` is the game's own outcome, not the reward (see
:mod:`~trl_env.adapters.textarena_outcome`): the winner of a two-player game, the win message of a puzzle.

Seeds: the game's seed is :func:`~trl_env.adapters.seeds.seed_index` of the seed. TextArena draws from
Python's *global* ``random``, so each env swaps its own state in around each game call under a lock.

Example:
    >>> factory = textarena_env("TicTacToe-v0", opponent="random")
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
import math
import random
import threading
from collections.abc import Callable
from typing import Any

import textarena
from textarena.envs.registration import ENV_REGISTRY

from trl_env.adapters.actions import clean_text
from trl_env.adapters.seeds import seed_index
from trl_env.adapters.textarena_games import OFFLINE_SINGLE_PLAYER, OFFLINE_TWO_PLAYER, class_name, make_game
from trl_env.adapters.textarena_moves import game_class, legal_moves
from trl_env.adapters.textarena_opponents import (
    LEGAL_MOVE_GAMES,
    OPPONENTS,
    LegalMovePolicy,
    RandomLegalMove,
    check_game,
    random_move_opponent,
    resolve_opponent,
)
from trl_env.adapters.textarena_outcome import end_reason, game_over_line, has_win, success_of
from trl_env.errors import BackendError, ConfigError

__all__ = [
    "LEGAL_MOVE_GAMES", "OFFLINE_SINGLE_PLAYER", "OFFLINE_TWO_PLAYER", "OPPONENTS", "LegalMovePolicy",
    "RandomLegalMove", "TextArenaEnv", "random_move_opponent", "textarena_env",
]  # fmt: skip

MAX_OPPONENT_MOVES = 200  # between two model moves; then the episode is truncated
_RANDOM_LOCK = threading.Lock()  # guards Python's global random while a game runs
GAME_ID = textarena.GAME_ID
PLAYER_ACTION = textarena.ObservationType.PLAYER_ACTION


class TextArenaEnv:
    """One TextArena game; the model plays ``player_id``, ``opponent`` plays the other seats.

    Reward: 0.0 until the game ends, then the game's reward for the model's seat: in 0.7.4 two-player
    games give +1 (win), 0 (draw) and -1 (loss or too many invalid moves); single-player ones give
    a score, mostly in [-1, 1] (e.g. 2048: progress to the target tile; an invalid move: -1), which is
    why ``metrics()["success"]`` comes from the game's outcome instead. A non-numeric reward (some games
    in 0.7.4 store their error message there by mistake) counts as -1.
    The episode also ends after ``max_steps`` model moves, or when the opponent makes ``MAX_OPPONENT_MOVES``
    (200) moves in a row (reward 0.0, ``metrics()["truncated"]`` 1.0).

    Args:
        game_id: a TextArena id, e.g. ``"TicTacToe-v0"``.
        opponent: ``None`` for single-player games, else ``"random"`` (a random legal move), a
            :class:`LegalMovePolicy`, a callable ``str -> str`` or a ``"module:function"`` string.
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
        self.opponent = resolve_opponent(opponent) if opponent is not None else None
        if self.opponent is not None and game_id in ENV_REGISTRY:
            check_game(self.opponent, game_id, class_name(game_id))
        self.num_players = num_players if num_players is not None else (1 if opponent is None else 2)
        self.env_kwargs = dict(env_kwargs or {})
        self.reward, self.alive, self.steps, self.truncated = 0.0, False, 0, False
        self.success: bool | None = None
        self.end_reason, self.invalid_move = "", False
        self._game: Any = None
        self._random_state: Any = None
        self._seen: dict[int, str] = {}
        self._latest = ""

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
        text = "\n".join(lines)
        self._seen[pid] = f"{self._seen.get(pid, '')}\n{text}"  # the seat's whole game, for its move candidates
        self._latest = text
        return text

    @property
    def game(self) -> Any:
        """The TextArena game being played (None before :meth:`reset`)."""
        return self._game

    def legal_moves(self) -> list[str]:
        """The legal moves of the model's seat in the current position (what the built-in opponent draws from).

        Candidates are the game's own move lists and the bracketed moves its seat was shown during the game;
        the game itself judges each (see :mod:`~trl_env.adapters.textarena_moves`).

        Returns:
            The legal moves, possibly empty; empty when the game is over.
        """
        if not self.alive:
            return []
        return self._call(legal_moves, self._game, self._latest, self._seen.get(self.player_id, ""))

    def _opponent_move(self, pid: int, observation: str) -> str:
        """The opponent's move; a :class:`LegalMovePolicy` chooses among the legal moves of the position."""
        if not isinstance(self.opponent, LegalMovePolicy):
            return str(self.opponent(observation))
        moves = self._call(legal_moves, self._game, observation, self._seen.get(pid, ""))
        if not moves:
            raise BackendError(
                f"{self.game_id}: the opponent (seat {pid}) found no legal move in this position; "
                "pass your own opponent= for this game"
            )
        return str(self.opponent(observation, moves))

    def _advance(self, done: bool) -> str:
        """Let the opponent seats move until it is the model's turn or the game is over; the model's delta."""
        opponent_moves = 0
        while not done:
            pid, observations = self._game.get_observation()
            if pid == self.player_id:
                return self._render(pid, observations)
            if self.opponent is None:
                raise BackendError(f"{self.game_id}: seat {pid} is to move but textarena_env got no opponent")
            if opponent_moves >= MAX_OPPONENT_MOVES:  # a turn of many moves (a card game's draws) never handed back
                self.alive, self.truncated = False, True
                return f"The game was stopped: the opponent made {opponent_moves} moves in a row."
            move = self._opponent_move(pid, self._render(pid, observations))
            done, _ = self._call(self._game.step, move)
            opponent_moves += 1
        rewards, game_info = self._game.close()
        leftover = self._game.state.observations.get(self.player_id, [])
        value = (rewards or {}).get(self.player_id, 0.0)
        self.reward = float(value) if isinstance(value, int | float) and math.isfinite(value) else -1.0
        self.success = success_of(game_class(self._game), rewards, game_info, self.player_id)
        self.end_reason = end_reason(game_info, self.player_id)
        self.invalid_move = bool((game_info or {}).get(self.player_id, {}).get("invalid_move"))
        self.alive = False
        delta = self._render(self.player_id, leftover)
        why = game_over_line(self.end_reason, delta)  # the model and the transcript see why the game ended
        return f"{delta}\n{why}" if delta and why else delta or why

    def reset(self, seed: str) -> tuple[TextArenaEnv, str]:
        """Start the game with the seed's integer; the model's first delta (after the opponents' moves)."""
        self._game = make_game(self.game_id, self.env_kwargs, self.format_actions)
        self._random_state = None
        self._seen = {}
        self.reward, self.alive, self.steps, self.truncated = 0.0, True, 0, False
        self.success, self.end_reason, self.invalid_move = None, "", False
        self._call(self._game.reset, num_players=self.num_players, seed=seed_index(seed))
        return self, self._advance(False)

    def step(self, action: str) -> tuple[TextArenaEnv, str]:
        """Play the model's move, then the opponents' moves; the model's next delta."""
        if not self.alive:
            return self, "The game is over."
        self.steps += 1
        done, _ = self._call(self._game.step, clean_text(action)[: self.max_action_chars])
        delta = self._advance(done)
        if self.alive and self.steps >= self.max_steps:  # (alive: not already ended or stopped above)
            self.alive, self.truncated = False, True
            delta += f"\nThe game was stopped after {self.max_steps} moves."
        return self, delta

    def metrics(self) -> dict[str, float]:
        """``success`` (the game's own win, see :mod:`~trl_env.adapters.textarena_outcome`; absent for a game
        without one), ``steps`` the model played, ``truncated`` and ``invalid_move`` (the model's seat lost
        by invalid moves)."""
        metrics = {"steps": float(self.steps), "truncated": float(self.truncated),
                   "invalid_move": float(self.invalid_move)}  # fmt: skip
        if self._game is None or has_win(game_class(self._game)):
            metrics["success"] = float(bool(self.success) and not self.alive)
        return metrics

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
players has to be 2, received 1); pass opponent= for the other seats: opponent="random" (a random legal move; on \
the command line --env-kwargs '{"game_id": "TicTacToe-v0", "opponent": "random"}') or your own function
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
        hint = (
            f'; pass opponent= for the other seats: opponent="random" (a random legal move; on the command line '
            f'--env-kwargs \'{{"game_id": "{game_id}", "opponent": "random"}}\') or your own function'
            if opponent is None
            else ""
        )
        raise ConfigError(
            f"textarena_env({game_id!r}): the game rejects {env.num_players} player(s) ({error}){hint}"
        ) from error
    except Exception as error:
        raise BackendError(f"textarena_env({game_id!r}) cannot start here: {type(error).__name__}: {error}") from error
    return functools.partial(TextArenaEnv, game_id, opponent=opponent, player_id=player_id, num_players=num_players,
                             format_actions=format_actions, max_steps=max_steps, max_action_chars=max_action_chars,
                             env_kwargs=env_kwargs)  # fmt: skip
