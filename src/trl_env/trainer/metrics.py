"""Per-step ``env/*`` metrics in TRL's logs.

Example:
    >>> from trl_env.episode import Episode
    >>> episode_metrics([Episode(seed="s", prompt_ids=[1], prompt_text="", reward=1.0)])["env/reward_mean"]
    1.0
"""

from __future__ import annotations

from typing import Any

from trl_env.episode import Episode, StopReason
from trl_env.trainer.trl_compat import log_metric


def episode_metrics(episodes: list[Episode]) -> dict[str, float]:
    """The ``env/*`` figures of one rollout.

    Args:
        episodes: the rollout's episodes.

    Returns:
        Mean reward and turns, error count, parse-failure rate (per model turn) and truncated rate.
    """
    n = max(1, len(episodes))
    turns = sum(e.num_turns for e in episodes)
    return {
        "env/reward_mean": sum(e.reward for e in episodes) / n,
        "env/turns_mean": turns / n,
        "env/errors": float(sum(e.failed for e in episodes)),
        "env/parse_failure_rate": sum(e.parse_failures for e in episodes) / max(1, turns),
        "env/truncated_rate": sum(e.stop_reason == StopReason.TOKEN_BUDGET for e in episodes) / n,
    }


def log_episode_metrics(trainer: Any, episodes: list[Episode]) -> None:
    """Add the rollout's ``env/*`` figures to the metrics TRL logs at its next logging step."""
    for name, value in episode_metrics(episodes).items():
        log_metric(trainer, name, value)
