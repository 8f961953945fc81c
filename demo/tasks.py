"""The demo's tasks and their env factories: guess-the-number (the demo), vault doors and guess rounds.

Example:
    >>> sorted(TASKS), REWARDS, MAX_TURNS["rounds"]
    (['doors', 'guess', 'rounds'], ('ratio', 'info_gain'), 16)
"""

from __future__ import annotations

import functools
import pkgutil
from typing import Any

from examples.guess_number.rewards import REWARDS

ENV_KWARGS = {"low": 1, "high": 16, "max_turns": 5}
# the env's reward: "ratio" (the original shaped score) stays until a learning comparison shows "info_gain"
# (additive per-turn information, docs/credit_assignment.md) does better
DEMO_REWARD = "ratio"
# the demo's task, and one where the first turn decides whether success is possible (the credit comparison)
TASKS = {
    "guess": ("examples.guess_number:GuessNumberEnv", ENV_KWARGS),
    "doors": ("examples.vault_doors:VaultDoorsEnv", {"doors": 3, "low": 1, "high": 8, "max_turns": 5}),
    # a long-horizon task (history policies, docs/history.md): 4 rounds of 4 guesses, up to 16 model turns
    "rounds": ("examples.guess_rounds:GuessRoundsEnv", {"rounds": 4, "low": 1, "high": 8, "turns_per_round": 4}),
}
MAX_TURNS = {"guess": 5, "doors": 5, "rounds": 16}  # the most model turns an episode of each task can take

__all__ = ["DEMO_REWARD", "ENV_KWARGS", "MAX_TURNS", "REWARDS", "TASKS", "task_factory"]


def task_factory(task: str, reward: str = DEMO_REWARD) -> functools.partial[Any]:
    """The env factory of a demo task with the reward ``reward``.

    Args:
        task: a key of ``TASKS`` (``"guess"``, ``"doors"`` or ``"rounds"``).
        reward: the env's reward, ``"ratio"`` or ``"info_gain"`` (:mod:`examples.guess_number.rewards`).

    Returns:
        A picklable factory building the task's env (the env refuses an unknown reward).

    Example:
        >>> task_factory("guess", "info_gain")().reward_kind
        'info_gain'
        >>> task_factory("doors", "info_gain")().code.reward_kind
        'info_gain'
        >>> task_factory("rounds")().rounds
        4
    """
    factory_path, env_kwargs = TASKS[task]
    return functools.partial(pkgutil.resolve_name(factory_path), **env_kwargs, reward=reward)
