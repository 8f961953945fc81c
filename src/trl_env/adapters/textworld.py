"""TextWorld adapter: text adventures generated and compiled locally, played through TextWorld's interpreter.

Games are made with TextWorld's own generator (``textworld.generator.make_game`` and
``compile_game``, the API behind ``tw-make``), which compiles Inform 7 source with the Inform 7
compiler shipped inside the ``textworld`` wheel, into a cache folder keyed by the generation
options: ``<cache_dir>/<hash of options>/game-<n>.z8``. A game is compiled once (about 3 s)
and reused by every episode, process and run after that.

Seeds: the seed's :func:`~trl_env.adapters.seeds.seed_index` modulo ``num_games`` picks game
``n`` of a pool; game ``n`` is generated with TextWorld seed ``first_game_seed + n``. With
``num_games=None`` every distinct seed index is its own game (compiled on first use).

Example:
    >>> import tempfile
    >>> factory = textworld_env(num_games=1, cache_dir=tempfile.mkdtemp())
    >>> env, delta = factory().reset("0")
    >>> "-= " in delta and env.alive  # the first room's name, e.g. "-= Spare Room =-"
    True
    >>> env, delta = env.step("inventory")
    >>> delta
    'You are carrying nothing.'
    >>> env.close()
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import textworld
import textworld.generator
from jericho.jericho import UnsupportedGameWarning

from trl_env.adapters.actions import clean_text, cut_utf8
from trl_env.adapters.seeds import seed_index
from trl_env.errors import ConfigError

# Jericho warns on every start that it has no score/move detection for TextWorld's games;
# TextWorld reads the score itself, so the warning says nothing about these envs.
warnings.filterwarnings("ignore", category=UnsupportedGameWarning)
_COMPILE_LOCK = threading.Lock()  # one compilation at a time per process (they are CPU-heavy anyway)
_STATUS_LINE = re.compile(r"\n*>\s*(-=.*?=-\s*-?[0-9]+/[0-9]+)?\s*$", re.DOTALL)  # the prompt and status bar
_BANNER_LINE = re.compile(r"^[\s$_|\\/<>]*$")  # the ASCII-art "TEXT WORLD" title: only these characters


def default_cache_dir() -> Path:
    """``$TRL_ENV_CACHE/textworld`` if set, else ``~/.cache/trl_env/textworld``."""
    root = os.environ.get("TRL_ENV_CACHE")
    return Path(root) / "textworld" if root else Path.home() / ".cache" / "trl_env" / "textworld"


def game_file(options: dict[str, int], game_seed: int, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The compiled game for these generation options and TextWorld seed, compiled on first use.

    Args:
        options: ``{"nb_rooms": ..., "nb_objects": ..., "quest_length": ...}``.
        game_seed: TextWorld's generation seed.
        cache_dir: where games are kept (default :func:`default_cache_dir`).

    Returns:
        The path of the ``.z8`` file (its ``.json`` sits beside it).
    """
    key = hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    folder = folder / f"tw-{key}"
    target = folder / f"game-{game_seed}.z8"
    if target.exists():
        return target
    with _COMPILE_LOCK:
        if target.exists():
            return target
        folder.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".compiling-", dir=folder))  # other processes may compile too
        try:
            game_options = textworld.GameOptions()
            game_options.nb_rooms, game_options.nb_objects = options["nb_rooms"], options["nb_objects"]
            game_options.quest_length = options["quest_length"]
            game_options.seeds = game_seed
            game_options.path = str(work / "game.z8")
            game_options.force_recompile = True
            game = textworld.generator.make_game(game_options)
            compiled = Path(textworld.generator.compile_game(game, game_options))
            os.replace(compiled.with_suffix(".json"), target.with_suffix(".json"))
            os.replace(compiled, target)  # last: a present .z8 means a complete game
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def clean_feedback(text: str, strip_banner: bool = True) -> str:
    """The interpreter's text without the trailing prompt and status bar, and without the title art.

    Example:
        >>> clean_feedback("\\nYou are carrying nothing.\\n\\n>      -= Spare Room =-0/2")
        'You are carrying nothing.'
    """
    text = _STATUS_LINE.sub("", text)
    lines = text.split("\n")
    if strip_banner and any("$$" in line for line in lines[:30]):
        while lines and _BANNER_LINE.match(lines[0]):
            lines.pop(0)
    return "\n".join(lines).strip()


class TextWorldEnv:
    """One TextWorld game, played one command per step.

    Reward: the game's score so far (points for quest steps done), divided by the game's
    maximum score when ``normalize_reward`` (then in [0, 1]; 1.0 = quest completed). The episode
    ends when the game is won or lost, or after ``max_steps`` commands.

    Args:
        world_size: rooms in the generated world.
        nb_objects: objects in the world.
        quest_length: actions the quest needs.
        num_games: size of the game pool seeds index into (``None``: one game per seed index).
        first_game_seed: TextWorld seed of game 0 of the pool.
        cache_dir: where compiled games are kept (default :func:`default_cache_dir`).
        admissible_commands: append ``Admissible commands: ...`` (TextWorld's list of the
            commands that make sense here) to each delta.
        normalize_reward: divide the score by the maximum score.
        max_steps: the most commands in an episode.
        max_action_bytes: the action is put on one line (the interpreter reads one command line)
            and cut to this many UTF-8 bytes (the Z-machine reads at most 198). Control characters
            are removed and lone surrogates replaced first (:func:`~trl_env.adapters.actions.clean_text`):
            the interpreter is C code that reads a NUL as the end of the command and then crashes.
    """

    def __init__(
        self,
        *,
        world_size: int = 3,
        nb_objects: int = 5,
        quest_length: int = 3,
        num_games: int | None = 16,
        first_game_seed: int = 0,
        cache_dir: str | None = None,
        admissible_commands: bool = False,
        normalize_reward: bool = True,
        max_steps: int = 50,
        max_action_bytes: int = 190,
    ) -> None:
        self.options = {"nb_rooms": world_size, "nb_objects": nb_objects, "quest_length": quest_length}
        self.num_games, self.first_game_seed, self.cache_dir = num_games, first_game_seed, cache_dir
        self.admissible_commands, self.normalize_reward = admissible_commands, normalize_reward
        self.max_steps, self.max_action_bytes = max_steps, max_action_bytes
        self.reward, self.alive, self.steps = 0.0, False, 0
        self.score, self.max_score, self.won, self.lost = 0, 1, False, False
        self._game: Any = None

    def _delta(self, state: Any) -> str:
        text = clean_feedback(state.feedback)
        if self.admissible_commands and state.get("admissible_commands"):
            text += "\n\nAdmissible commands: " + ", ".join(state["admissible_commands"])
        return text

    def _update(self, state: Any) -> None:
        self.score, self.max_score = int(state.get("score") or 0), int(state.get("max_score") or 1)
        self.won, self.lost = bool(state.get("won")), bool(state.get("lost"))
        self.reward = self.score / max(self.max_score, 1) if self.normalize_reward else float(self.score)
        if self.won or self.lost or self.steps >= self.max_steps:
            self.alive = False
            self.close()

    def reset(self, seed: str) -> tuple[TextWorldEnv, str]:
        """Start the game the seed picks (compiling it on first use); its introduction and first room."""
        self.close()
        index = seed_index(seed, self.num_games)
        path = game_file(self.options, self.first_game_seed + index, self.cache_dir)
        infos = textworld.EnvInfos(score=True, max_score=True, won=True, lost=True,
                                   admissible_commands=self.admissible_commands)  # fmt: skip
        self._game = textworld.start(str(path), request_infos=infos)
        self.reward, self.alive, self.steps = 0.0, True, 0
        state = self._game.reset()
        self._update(state)
        return self, self._delta(state)

    def step(self, action: str) -> tuple[TextWorldEnv, str]:
        """Send one command; the game's answer."""
        if not self.alive or self._game is None:
            return self, "The game is over."
        # no NUL (frotz crashes on one), one line (a newline would be a second command), a bounded size
        command = cut_utf8(" ".join(clean_text(action).split()), self.max_action_bytes)
        self.steps += 1
        state, _, _ = self._game.step(command)
        delta = self._delta(state)
        self._update(state)
        return self, delta

    def metrics(self) -> dict[str, float]:
        """``success`` (the game says won, and not lost), raw ``score``, ``max_score`` and ``steps``."""
        success = self.won and not self.lost  # the game's own outcome, not the score: points come before the end
        return {"success": float(success), "score": float(self.score), "max_score": float(self.max_score),
                "steps": float(self.steps)}  # fmt: skip

    def close(self) -> None:
        """Stop the interpreter (it is started again by the next reset)."""
        if self._game is not None:
            game, self._game = self._game, None
            game.close()


def textworld_env(
    *,
    world_size: int = 3,
    nb_objects: int = 5,
    quest_length: int = 3,
    num_games: int | None = 16,
    first_game_seed: int = 0,
    cache_dir: str | None = None,
    admissible_commands: bool = False,
    normalize_reward: bool = True,
    max_steps: int = 50,
    max_action_bytes: int = 190,
) -> Callable[[], TextWorldEnv]:
    """A factory of :class:`TextWorldEnv` (same arguments); the options are checked here.

    Args:
        world_size, nb_objects, quest_length, num_games, first_game_seed, cache_dir,
            admissible_commands, normalize_reward, max_steps, max_action_bytes: see :class:`TextWorldEnv`.

    Returns:
        A picklable zero-argument callable returning a fresh env.

    Example:
        >>> textworld_env(world_size=0)
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigError: textworld_env: world_size must be an integer >= 1, got 0
    """
    checks = [
        ("world_size", world_size, 1),
        ("nb_objects", nb_objects, 0),
        ("quest_length", quest_length, 1),
        ("max_steps", max_steps, 1),
        ("max_action_bytes", max_action_bytes, 1),
        ("first_game_seed", first_game_seed, 0),
    ]
    if num_games is not None:
        checks.append(("num_games", num_games, 1))
    for name, value, low in checks:
        if not isinstance(value, int) or value < low:
            raise ConfigError(f"textworld_env: {name} must be an integer >= {low}, got {value!r}")
    return functools.partial(
        TextWorldEnv,
        world_size=world_size,
        nb_objects=nb_objects,
        quest_length=quest_length,
        num_games=num_games,
        first_game_seed=first_game_seed,
        cache_dir=cache_dir,
        admissible_commands=admissible_commands,
        normalize_reward=normalize_reward,
        max_steps=max_steps,
        max_action_bytes=max_action_bytes,
    )
