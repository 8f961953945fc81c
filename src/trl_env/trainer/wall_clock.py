"""Training bounded by wall time: a stop before the budget runs out, and a learning rate that decays over it.

A run bounded by minutes (``TrainSettings.max_minutes``) sets ``max_steps`` far beyond what it reaches, so
TRL's schedules, which decay over ``max_steps``, stay flat: :class:`LinearDecayOverMinutes` decays over the
minutes instead.

Example:
    >>> clock = iter([0.0, 30.0, 60.0]).__next__
    >>> decay = LinearDecayOverMinutes(1.0, clock=clock)
    >>> decay.start = clock()
    >>> decay.factor(), decay.factor()
    (0.5, 0.0)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from torch.optim.lr_scheduler import LambdaLR
from transformers import TrainerCallback

from trl_env.errors import ConfigError


class TimeLimit(TrainerCallback):
    """Stops training once another step would likely end past ``minutes`` of wall time.

    Example:
        >>> TimeLimit(0.5).budget_s
        30.0
    """

    def __init__(self, minutes: float) -> None:
        self.budget_s = 60.0 * minutes
        self.start: float | None = None
        self.step_times: list[float] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start = self._last = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = time.perf_counter()
        self.step_times.append(now - self._last)
        self._last = now
        recent = self.step_times[-3:]
        expected = sum(recent) / len(recent)
        if now - (self.start or now) + 0.5 * expected >= self.budget_s:
            control.should_training_stop = True


class LinearDecayOverMinutes(TrainerCallback):
    """Decays the learning rate linearly from its initial value to 0 over ``minutes`` of training wall time.

    Each step trains at ``learning_rate x (1 - elapsed / budget)``, elapsed counted from the start of training.
    It takes the place of the trainer's schedule (``lr_scheduler_type``, warm-up included), which must be one of
    transformers' factor schedules (a ``LambdaLR``: linear, constant, cosine, ...), so that the logged
    ``learning_rate`` is the decayed one. ``TrainSettings(lr_decay="minutes")`` adds it with
    :class:`TimeLimit`.

    Args:
        minutes: the training budget the rate reaches 0 at.
        clock: seconds, monotonic (default ``time.perf_counter``; a test passes its own).

    Example:
        >>> LinearDecayOverMinutes(10).budget_s
        600.0
    """

    def __init__(self, minutes: float, clock: Callable[[], float] = time.perf_counter) -> None:
        if minutes <= 0:
            raise ConfigError(f"LinearDecayOverMinutes: minutes must be positive, got {minutes}")
        self.budget_s = 60.0 * minutes
        self.clock = clock
        self.start: float | None = None
        self._installed = False

    def factor(self, _step: int | None = None) -> float:
        """The fraction of the initial learning rate to train at now (1 before training starts)."""
        if self.start is None:
            return 1.0
        return max(0.0, 1.0 - (self.clock() - self.start) / self.budget_s)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start = self.clock()

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        scheduler, optimizer = kwargs.get("lr_scheduler"), kwargs.get("optimizer")
        if not self._installed:
            if not isinstance(scheduler, LambdaLR):
                named = getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type)  # an enum in GRPOConfig
                raise ConfigError(
                    f"lr decay over minutes replaces a LambdaLR schedule's factor; the trainer's scheduler is "
                    f"{type(scheduler).__name__} (lr_scheduler_type {named!r}): use a LambdaLR "
                    "schedule such as 'linear' or 'constant'"
                )
            # the scheduler's own step then keeps the decayed rate too, so the logged learning_rate is this one
            scheduler.lr_lambdas = [self.factor] * len(scheduler.lr_lambdas)
            self._installed = True
        factor = self.factor()  # this step trains at the rate of its start time, not the previous step's end
        for group, base in zip(optimizer.param_groups, scheduler.base_lrs, strict=True):
            group["lr"] = base * factor
