"""Ending a run on its best stretch: the weights whose training episodes went best, restored when training ends.

A run bounded by minutes ends wherever the clock stops it, and a policy can lose in its last steps what it had
learned (a collapse, a drift). :class:`KeepBestWeights` watches a logged training metric (by default the
episodes' success rate), and at the end of training puts back the weights of the step where the metric's
running mean over ``window`` steps was highest. It selects on training episodes only, so a held-out evaluation
after it stays held out.

Example:
    >>> keep = KeepBestWeights(window=2)
    >>> [keep.record(success) for success in (0.25, 0.75, 0.5, 0.0)]  # True: a new best running mean
    [False, True, True, False]
    >>> keep.best, keep.best_index
    (0.625, 3)
"""

from __future__ import annotations

import statistics
from typing import Any

import torch
from transformers import TrainerCallback

from trl_env.errors import ConfigError


class KeepBestWeights(TrainerCallback):
    """Restores, when training ends, the weights that sampled the best stretch of training episodes.

    Each step's episodes are sampled by the weights of the step's start, so those are the weights kept: a copy
    of the trainable parameters (a LoRA adapter: a few MB) is taken as each step begins, and kept when the
    running mean of ``metric`` over the last ``window`` logged steps reaches a new high (ties keep the earlier
    step). With pipelined rollouts (``max_staleness`` > 0) the episodes were sampled up to that many steps
    earlier than the weights kept. With ``num_iterations`` > 1 only the steps that sample a batch log the env's
    metrics, and only they are counted. The trainer must log every step (``logging_steps=1``, the recipe's).

    Args:
        metric: a key of the trainer's logs, higher is better (default ``"env/success_rate"``).
        window: steps in the running mean: a single lucky step of a few groups cannot win alone.

    Attributes:
        best: the highest running mean, or None before ``window`` steps were logged.
        best_step: the optimizer step whose starting weights were kept (1 = the untrained model's).
        restored: whether the kept weights were put back at the end of training.
    """

    def __init__(self, metric: str = "env/success_rate", window: int = 6) -> None:
        if window < 1:
            raise ConfigError(f"KeepBestWeights: window must be at least 1 step, got {window}")
        self.metric, self.window = metric, window
        self.values: list[float] = []
        self.best: float | None = None
        self.best_index: int | None = None  # in ``values``, 1-based: the step of the window's last value
        self.best_step: int | None = None
        self.restored = False
        self._step_start: dict[str, torch.Tensor] = {}
        self._kept: dict[str, torch.Tensor] | None = None

    def record(self, value: float) -> bool:
        """Add one step's value; True when the running mean ending at it is a new best."""
        self.values.append(float(value))
        if len(self.values) < self.window:
            return False
        mean = statistics.fmean(self.values[-self.window :])
        if self.best is not None and mean <= self.best:
            return False
        self.best, self.best_index = mean, len(self.values)
        return True

    def on_step_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        self._step_start = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not logs or "loss" not in logs:  # a step's log, not the end-of-training summary
            return
        if self.metric not in logs:
            if self.values:  # a step that trained on earlier episodes again (num_iterations > 1) logs no env metric
                return
            known = ", ".join(sorted(logs, key=lambda key: (not key.startswith("env/"), key)))  # the env's first
            raise ConfigError(f"KeepBestWeights: the trainer's logs have no {self.metric!r}; logged are {known}")
        if self.record(logs[self.metric]):
            self._kept, self.best_step = self._step_start, state.global_step

    def on_train_end(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self._kept is None:
            return
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name in self._kept:
                    parameter.copy_(self._kept[name])
        self.restored = True


def kept_best(trainer: Any) -> dict[str, Any] | None:
    """What the trainer's :class:`KeepBestWeights` kept, or None when it has none.

    Returns:
        ``{"metric", "window", "best", "step", "restored", "steps"}``: the running mean and the step whose
        starting weights the model now has, out of ``steps`` logged.
    """
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, KeepBestWeights):
            return {
                "metric": callback.metric,
                "window": callback.window,
                "best": callback.best,
                "step": callback.best_step,
                "restored": callback.restored,
                "steps": len(callback.values),
            }
    return None
