"""The demo's tasks and their env factories: guess-the-number (the demo) and vault doors, each with a reward.

Example:
    >>> sorted(TASKS), REWARDS
    (['doors', 'guess'], ('ratio', 'info_gain'))
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
}

__all__ = ["DEMO_REWARD", "ENV_KWARGS", "REWARDS", "TASKS", "task_factory"]


def task_factory(task: str, reward: str = DEMO_REWARD) -> functools.partial[Any]:
    """The env factory of a demo task with the reward ``reward``.

    Args:
        task: a key of ``TASKS`` (``"guess"`` or ``"doors"``).
        reward: the env's reward, ``"ratio"`` or ``"info_gain"`` (:mod:`examples.guess_number.rewards`).

    Returns:
        A picklable factory building the task's env (the env refuses an unknown reward).

    Example:
        >>> task_factory("guess", "info_gain")().reward_kind
        'info_gain'
        >>> task_factory("doors", "info_gain")().code.reward_kind
        'info_gain'
    """
    factory_path, env_kwargs = TASKS[task]
    return functools.partial(pkgutil.resolve_name(factory_path), **env_kwargs, reward=reward)
