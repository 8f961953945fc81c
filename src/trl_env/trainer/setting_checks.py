"""Settings that are only wrong together: each combination has one check here, and it is an error.

``build_trainer`` (``trl-env train``, the demo) and ``make_rollout_func`` (your own ``GRPOTrainer``) both call
these, so a combination is refused with the same message whichever path builds the run:

* :func:`episode_budget`: while training, the episode token budget is the trainer's
  ``GRPOConfig.max_completion_length``; a larger ``RolloutConfig.max_completion_tokens`` is refused.
* :func:`check_tree_credit`: tree rollouts and the ``"tree"`` advantage go together, and the group size
  must be a multiple of the tree's leaves per root.
* :func:`check_turn_samples`: per-turn histories need a trainer that trains turn samples, and no KL term.
* :func:`check_lr_decay`: a learning rate that decays over minutes needs the minutes.

Example:
    >>> from trl_env.engine.tree import TreeShape
    >>> episode_budget(RolloutConfig(), max_completion_length=96).max_completion_tokens
    96
    >>> check_tree_credit(TreeShape((1,), 2), "episode", num_generations=4)
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigError: tree rollouts and advantage='tree' go together: ...
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trl_env.engine.config import RolloutConfig
from trl_env.engine.tree import TreeShape
from trl_env.errors import ConfigError


def episode_budget(config: RolloutConfig, max_completion_length: int) -> RolloutConfig:
    """``config`` with the trainer's episode token budget: ``max_completion_length`` when it sets none.

    TRL does not cut what a ``rollout_func`` returns, so an episode must fit the trainer's limit; a smaller
    ``config.max_completion_tokens`` is kept (a tighter budget for each episode).

    Args:
        config: the rollout's settings.
        max_completion_length: the trainer's ``GRPOConfig.max_completion_length``.

    Returns:
        ``config`` itself when it sets a budget within the limit, else a copy with the limit as its budget.

    Raises:
        ConfigError: ``config.max_completion_tokens`` exceeds ``max_completion_length``.

    Example:
        >>> episode_budget(RolloutConfig(max_completion_tokens=64), max_completion_length=96).max_completion_tokens
        64
    """
    own = config.max_completion_tokens
    if own is None:
        return dataclasses.replace(config, max_completion_tokens=max_completion_length)
    if own > max_completion_length:
        raise ConfigError(
            f"RolloutConfig.max_completion_tokens={own} exceeds the trainer's max_completion_length="
            f"{max_completion_length}; TRL does not cut rollout_func output, so trl-env must: leave "
            "max_completion_tokens None (the trainer's budget is used) or lower it"
        )
    return config


def check_tree_credit(tree: TreeShape | None, advantage: str, num_generations: int) -> None:
    """Refuse tree rollouts without the ``"tree"`` advantage (and the other way round), or a group size
    that the tree does not divide.

    Args:
        tree: the rollout's tree shape (``RolloutConfig.tree``), None for plain rollouts.
        advantage: the trainer's credit assignment (:func:`trainer_advantage`, or ``TrainSettings.advantage``).
        num_generations: episodes per seed (the GRPO group size).

    Raises:
        ConfigError: naming both settings and the fix.
    """
    if (tree is not None) != (advantage == "tree"):
        raise ConfigError(
            "tree rollouts and advantage='tree' go together: the tree advantage credits each shared prefix once, "
            f"another gives every copy of it its leaf's advantage (got tree={tree}, advantage={advantage!r}); "
            "set both (TurnLevelGRPOTrainer(advantage_mode='tree'), trl-env train --advantage tree) or neither"
        )
    if tree is not None:
        tree.roots(num_generations)  # names a group size the tree does not divide now, not at the first rollout


def check_turn_samples(config: RolloutConfig, trainer: Any) -> None:
    """Refuse ``history="template"``/``"window"`` under a trainer that would train only the carriers.

    A plain ``GRPOTrainer`` would train each episode's carrier row (its turns without the env text between them),
    not its turn samples.

    Args:
        config: the rollout config.
        trainer: the ``GRPOTrainer`` about to train.

    Raises:
        ConfigError: naming the setting and the fix.
    """
    if not config.per_turn:
        return
    if not getattr(trainer, "trains_turn_samples", False):
        raise ConfigError(
            f"history={config.history!r} trains one sample per model turn, which needs TurnLevelGRPOTrainer "
            f"(advantage_mode='episode' is plain GRPO), not {type(trainer).__name__}"
        )


def trainer_advantage(trainer: Any) -> str:
    """The credit assignment of a trainer: ``TurnLevelGRPOTrainer``'s ``advantage_mode``, else ``"episode"``."""
    return getattr(trainer, "advantage_mode", "episode")


def check_lr_decay(lr_decay: str, max_minutes: float | None) -> None:
    """Refuse a learning-rate decay (``TrainSettings.lr_decay``) that is unknown or lacks its budget.

    Args:
        lr_decay: ``"steps"`` (the ``lr_scheduler_type`` over ``max_steps``, TRL's) or ``"minutes"`` (linearly to
            0 over ``max_minutes``, :class:`~trl_env.trainer.wall_clock.LinearDecayOverMinutes`).
        max_minutes: the run's wall-time budget, or None.

    Raises:
        ConfigError: an unknown ``lr_decay``, or ``"minutes"`` without a positive ``max_minutes``.

    Example:
        >>> check_lr_decay("minutes", max_minutes=10.0)
        >>> check_lr_decay("minutes", max_minutes=None)
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigError: lr_decay='minutes' decays the learning rate over max_minutes, which is None: ...
    """
    if lr_decay not in ("steps", "minutes"):
        raise ConfigError(f"lr_decay={lr_decay!r} is not one of 'steps' (over max_steps) or 'minutes'")
    if lr_decay == "minutes" and not (max_minutes and max_minutes > 0):
        raise ConfigError(
            f"lr_decay='minutes' decays the learning rate over max_minutes, which is {max_minutes}: set "
            "TrainSettings.max_minutes (trl-env train --max-minutes) or use lr_decay='steps'"
        )
