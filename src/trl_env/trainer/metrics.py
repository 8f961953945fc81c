"""Per-step ``env/*`` metrics in TRL's logs.

Example:
    >>> from trl_env.episode import Episode
    >>> episodes = [Episode(seed="s", prompt_ids=[1], prompt_text="", reward=1.0)]
    >>> episode_metrics(episode_sums(episodes))["env/reward_mean"]
    1.0
"""

from __future__ import annotations

from typing import Any

from trl_env.episode import Episode, StopReason
from trl_env.trainer.trl_compat import log_metric, sum_over_processes

# positions in episode_sums: the failure check reads these two
SUM_EPISODES, SUM_ERRORS = 0, 4


def episode_sums(episodes: list[Episode]) -> list[float]:
    """The additive counts behind the metrics: episodes, scored episodes, their reward, turns, errors,
    parse failures, truncated episodes, and the sum and count of the env's ``success`` metric (sums of a
    fixed length, so that processes can add theirs up)."""
    scored = [e for e in episodes if not e.failed]
    # ``success`` is the metric evaluation reads too (trl_env.evaluation); envs without it log no rate
    successes = [e.metrics["success"] for e in scored if e.metrics and "success" in e.metrics]
    return [
        float(len(episodes)),
        float(len(scored)),
        sum(e.reward for e in scored),
        float(sum(e.num_turns for e in episodes)),
        float(sum(e.failed for e in episodes)),
        float(sum(e.parse_failures for e in episodes)),
        float(sum(e.stop_reason == StopReason.TOKEN_BUDGET for e in episodes)),
        float(sum(successes)),
        float(len(successes)),
    ]


def episode_metrics(sums: list[float]) -> dict[str, float]:
    """The ``env/*`` figures from :func:`episode_sums` (of one process, or added over all).

    Returns:
        Mean reward (of the episodes whose env did not fail) and turns, the number of failed episodes,
        the parse-failure rate (per model turn), the truncated rate and, where the env reports a
        ``success`` metric, the success rate.

    Example:
        >>> episode_metrics([4, 4, 2.0, 8, 0, 0, 0, 3.0, 4])["env/success_rate"]
        0.75
        >>> "env/success_rate" in episode_metrics([4, 4, 2.0, 8, 0, 0, 0, 0.0, 0])
        False
    """
    n, scored, reward, turns, errors, parse_failures, truncated, successes, reporting = sums
    success = {"env/success_rate": successes / reporting} if reporting else {}
    return {
        "env/reward_mean": reward / max(1.0, scored),
        "env/turns_mean": turns / max(1.0, n),
        "env/errors": errors,
        "env/parse_failure_rate": parse_failures / max(1.0, turns),
        "env/truncated_rate": truncated / max(1.0, n),
        **success,
    }


def log_episode_metrics(trainer: Any, episodes: list[Episode]) -> list[float]:
    """Add the rollout's ``env/*`` figures, over the episodes of every process, to TRL's next log.

    A collective call when the trainer has several processes: every process must call it once per rollout.

    Returns:
        The :func:`episode_sums` added over every process (the failure check decides on them too, so that
        every process reaches the same decision).
    """
    sums = sum_over_processes(trainer, episode_sums(episodes))
    for name, value in episode_metrics(sums).items():
        log_metric(trainer, name, value)
    return sums
