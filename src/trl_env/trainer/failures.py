"""Loud env failures: training stops when the environment, not the model, is what fails.

A failed episode trains nothing, so a run whose envs all fail (a wrong seed format, a dead server)
would otherwise "train" happily on nothing. :class:`FailureMonitor` stops it with an error showing the
first failures, and each step's ``env/errors`` log says how many failed below that.

Example:
    >>> from trl_env.episode import Episode, StopReason
    >>> ok = Episode(seed="a", prompt_ids=[1], prompt_text="")
    >>> bad = Episode(seed="b", prompt_ids=[1], prompt_text="", stop_reason=StopReason.ENV_ERROR,
    ...               error="Countdown (seed='b', turn=0): exception: ValueError: invalid literal for int()")
    >>> monitor = FailureMonitor(max_rate=0.5, window=4)
    >>> monitor.observe([ok, bad])
    >>> monitor.observe([bad, bad])
    Traceback (most recent call last):
    ...
    trl_env.trainer.failures.EnvFailuresError: every episode of this step failed (2 of 2)...
"""

from __future__ import annotations

from collections import deque

from trl_env.episode import Episode
from trl_env.errors import ConfigError, TrlEnvError


class EnvFailuresError(TrlEnvError, RuntimeError):
    """Too many episodes failed in their environment for training to mean anything."""


class FailureMonitor:
    """Counts failed episodes per step and raises :class:`EnvFailuresError` past the limits.

    Args:
        max_rate: the largest fraction of failed episodes allowed over the last ``window`` steps.
        window: steps the fraction is taken over (it is checked once the window is full).
    """

    def __init__(self, max_rate: float = 0.5, window: int = 10) -> None:
        if not 0.0 <= max_rate <= 1.0 or window < 1:
            raise ConfigError(f"max_failure_rate must be in [0, 1] and failure_window >= 1, got {max_rate}, {window}")
        self.max_rate, self.window = max_rate, window
        self.steps: deque[tuple[int, int]] = deque(maxlen=window)

    def observe(self, episodes: list[Episode], *, counts: tuple[int, int] | None = None) -> None:
        """Record one step's episodes; raise when all failed, or too many over the window.

        Args:
            episodes: this process's episodes of the step (their first errors go into the message).
            counts: (failed, total) episodes of the step over every process; defaults to ``episodes``'s own.
                Under several processes pass the global counts, so that every process raises at the same
                step: a process that raised alone would leave the others waiting in TRL's next collective.

        Example:
            >>> from trl_env.episode import Episode, StopReason
            >>> bad = Episode(seed="b", prompt_ids=[1], prompt_text="", stop_reason=StopReason.ENV_ERROR, error="x")
            >>> FailureMonitor().observe([bad, bad], counts=(2, 4))  # the other process's two episodes were fine
        """
        failed = [e for e in episodes if e.failed]
        n_failed, n = counts if counts is not None else (len(failed), len(episodes))
        self.steps.append((n_failed, n))
        if n and n_failed == n:
            raise EnvFailuresError(_message(f"every episode of this step failed ({n_failed} of {n})", failed))
        total_failed, total = (sum(column) for column in zip(*self.steps, strict=True))
        if len(self.steps) == self.window and total and total_failed / total > self.max_rate:
            raise EnvFailuresError(
                _message(
                    f"{total_failed} of {total} episodes failed over the last {self.window} steps "
                    f"(more than max_failure_rate={self.max_rate})",
                    failed,
                )
            )


def _message(head: str, failed: list[Episode]) -> str:
    lines = [f"{head}; the environment, not the model, is failing. First errors:"]
    lines += [f"  {episode.error}" for episode in failed[:3]]
    if not failed:
        lines.append("  (none on this process: see the other processes' errors)")
    return "\n".join(lines)
