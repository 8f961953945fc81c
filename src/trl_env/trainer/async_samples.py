"""Episodes into the ``RolloutSample``s TRL's ``AsyncGRPOTrainer`` trains on: one per scored episode, or under
``history="template"``/``"window"`` one per model turn of it.

A group is the ``num_generations`` episodes of one seed. Each scored episode (its env did not fail, or
``failure_reward`` scores failures) becomes one sample: ``input_ids`` is the prompt then the completion,
``completion_mask`` is 0 on the prompt and on every env, tool and appended end-of-turn token (the episode's
``env_mask`` after the prompt), ``old_log_probs`` holds the sampled logprobs (0.0 where the mask is 0), and the
scalar ``advantage`` is the GRPO group advantage ``(r - mean) / (std + 1e-8)`` over the group's scored episodes
(population std, as TRL's own worker computes it). A failed episode is left out: it is not trained on and does
not count in its group's mean and std.

Per-turn samples (``per_turn=True``): each turn sample (:class:`~trl_env.episode.TurnSample`) of a scored
episode becomes a sample of its own: ``input_ids`` is the turn's prompt then its completion (the sampled ids
verbatim), ``completion_mask`` is 1 on the sampled ids only (0 on the prompt and on an end-of-turn token appended
after a turn cut at its budget), ``old_log_probs`` the sampled logprobs, and ``advantage`` the *episode's* group
advantage, unscaled (weight 1), with the episode's ``group_id`` and version. Weight 1 is what keeps an episode
weighing as its one sequence would under ``history="full"``: ``AsyncGRPOTrainer``'s loss is a token mean, the sum
of every trained token's clipped term over a micro-batch divided by the micro-batch's trained-token count
(``global_n_tokens``); the number of samples appears nowhere. The turn samples of an episode carry its sampled
tokens, each once, so they add the same terms to the sum and the same count to the denominator as its whole
sequence would: an episode weighs by its tokens, not by its number of turns (a scaled advantage, 1/turns say,
would make a long episode's tokens weigh less than a short one's). TRL's own worker does the same with the rows a
forked conversation produces. A turn sample with no sampled token (nothing to train) is left out. The episode's
figures (``sample_metrics`` and ``env/turn_samples``) ride on its first queued turn sample only: TRL averages each
metric over the samples that carry it, so the averages stay per episode.

Example:
    >>> from trl_env.episode import Episode
    >>> good = Episode(seed="7", prompt_ids=[1, 2], prompt_text="", reward=1.0)
    >>> good.add_model_tokens([5], [-0.5], "a"); good.add_env_tokens([6], "b")
    >>> bad = Episode(seed="7", prompt_ids=[1, 2], prompt_text="", reward=0.0)
    >>> bad.add_model_tokens([9], [-0.1], "c")
    >>> samples = episodes_to_samples([good, bad], num_generations=2, first_group_id=0, model_version=3)
    >>> s = samples[0]
    >>> s.input_ids.tolist(), s.completion_mask.tolist(), s.old_log_probs.tolist(), round(s.advantage, 6)
    ([1, 2, 5, 6], [0, 0, 1, 0], [0.0, 0.0, -0.5, 0.0], 1.0)
    >>> s.model_version, s.group_id, [x.advantage for x in samples][1] < 0
    (3, 0, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from trl.experimental.async_grpo.async_rollout_worker import RolloutSample

from trl_env.episode import Episode, TurnSample
from trl_env.errors import DataError

STD_EPSILON = 1e-8  # TRL's: a group whose rewards are all equal gets advantage 0, not a division by zero


def group_advantages(rewards: Sequence[float | None]) -> list[float | None]:
    """GRPO advantages of one group: ``(r - mean) / (std + 1e-8)`` over the scored rewards.

    Args:
        rewards: one reward per episode of the group; None for an unscored (failed) episode.

    Returns:
        One advantage per episode, None where the reward is None.

    Example:
        >>> [round(a, 3) for a in group_advantages([1.0, 0.0, None, 1.0]) if a is not None]
        [0.707, -1.414, 0.707]
        >>> group_advantages([0.5, 0.5])
        [0.0, 0.0]
    """
    scored = np.array([r for r in rewards if r is not None], dtype=np.float64)
    if scored.size == 0:
        return [None] * len(rewards)
    mean, std = float(scored.mean()), float(scored.std())
    return [None if r is None else (float(r) - mean) / (std + STD_EPSILON) for r in rewards]


def episode_reward(episode: Episode, failure_reward: float | None) -> float | None:
    """The reward an episode is scored with: its env's, ``failure_reward`` if its env failed, or None (unscored).

    Example:
        >>> from trl_env.episode import Episode, StopReason
        >>> failed = Episode(seed="s", prompt_ids=[1], prompt_text="", stop_reason=StopReason.ENV_ERROR)
        >>> episode_reward(failed, None), episode_reward(failed, -1.0)
        (None, -1.0)
    """
    if episode.failed:
        return failure_reward
    return float(episode.reward)


def sample_metrics(episode: Episode, reward: float, reward_std: float) -> dict[str, float]:
    """Per-sample figures the trainer averages over each micro-batch: the reward, the group's reward std, the
    episode's turns and parse failures, and every number the env's ``metrics()`` reported (as ``env/NAME``).

    Example:
        >>> from trl_env.episode import Episode
        >>> sample_metrics(Episode(seed="s", prompt_ids=[1], prompt_text="", metrics={"success": 1.0}), 1.0, 0.0)
        {'reward': 1.0, 'reward_std': 0.0, 'env/turns': 0.0, 'env/parse_failures': 0.0, 'env/success': 1.0}
    """
    metrics = {
        "reward": reward,
        "reward_std": reward_std,
        "env/turns": float(episode.num_turns),
        "env/parse_failures": float(episode.parse_failures),
    }
    for name, value in (episode.metrics or {}).items():
        if isinstance(value, int | float) and math.isfinite(value):
            metrics[f"env/{name}"] = float(value)
    return metrics


def episode_sample(
    episode: Episode, advantage: float, metrics: dict[str, float], group_id: int, version: int
) -> RolloutSample:
    """One ``RolloutSample``: the episode's tokens with the prompt as context (mask 0, logprob 0.0).

    Args:
        episode: a finished episode.
        advantage: its group advantage.
        metrics: its per-sample figures (:func:`sample_metrics`).
        group_id: its group's id.
        version: the policy version current when it started.

    Returns:
        The sample; ``prompt`` and ``completion`` hold the rendered texts, for TRL's trace logging.

    Raises:
        DataError: the episode's completion, mask and logprob lists differ in length.
    """
    completion_text = "".join(segment.text for segment in episode.segments)
    return _sample(
        f"episode {episode.seed!r}",
        episode,
        [{"role": "user", "content": episode.prompt_text}],
        completion_text,
        (advantage, version, group_id, metrics),
    )


def _sample(
    where: str,
    tokens: Episode | TurnSample,
    prompt: list[dict[str, Any]],
    completion_text: str,
    tags: tuple[float, int, int, dict[str, float]],
) -> RolloutSample:
    """The ``RolloutSample`` of ``tokens`` (an episode or a turn sample): its prompt ids as context (mask 0,
    logprob 0.0), then its completion ids with their mask and logprobs; ``tags`` is ``(advantage, version,
    group_id, metrics)``.

    Raises:
        DataError: the completion, mask and logprob lists differ in length (``where`` names the sample).
    """
    n = len(tokens.completion_ids)
    if not (len(tokens.env_mask) == len(tokens.logprobs) == n):
        raise DataError(
            f"{where}: {n} completion ids, {len(tokens.env_mask)} mask, {len(tokens.logprobs)} logprobs; "
            "a RolloutSample needs one of each per token"
        )
    advantage, version, group_id, metrics = tags
    context = len(tokens.prompt_ids)
    return RolloutSample(
        prompt=prompt,
        completion=[{"role": "assistant", "content": completion_text}],
        input_ids=np.asarray(list(tokens.prompt_ids) + list(tokens.completion_ids), dtype=np.int64),
        completion_mask=np.asarray([0] * context + list(tokens.env_mask), dtype=np.int64),
        # a mask-0 token's logprob is never read by the loss; zero it anyway, as TRL does for context
        old_log_probs=np.asarray(
            [0.0] * context + [lp if m else 0.0 for lp, m in zip(tokens.logprobs, tokens.env_mask, strict=True)],
            dtype=np.float32,
        ),
        advantage=float(advantage),
        model_version=int(version),
        group_id=int(group_id),
        metrics=metrics,
    )


def turn_samples(
    episode: Episode, advantage: float, metrics: dict[str, float], group_id: int, version: int
) -> list[RolloutSample]:
    """One ``RolloutSample`` per turn sample of ``episode`` that has a sampled token (see the module docstring).

    Args:
        episode: a finished episode played under ``history="template"`` or ``"window"``.
        advantage: its group advantage, given to every turn unscaled (weight 1: TRL's loss is a token mean).
        metrics: its per-sample figures (:func:`sample_metrics`), put on its first queued turn sample only.
        group_id: its group's id, shared by all its turns.
        version: the policy version current when it started.

    Returns:
        The samples in turn order; ``prompt`` holds the chat messages the turn's prompt rendered and
        ``completion`` the turn's text, for TRL's trace logging.

    Raises:
        DataError: a turn sample's completion, mask and logprob lists differ in length.

    Example:
        >>> from trl_env.episode import Episode, TurnSample
        >>> episode = Episode(seed="7", prompt_ids=[1, 2], prompt_text="")
        >>> episode.turn_samples = [TurnSample(0, [1, 2], [5, 6], [-0.5, 0.0], [1, 0], []),
        ...                         TurnSample(1, [1, 2, 5, 9], [7], [-0.25], [1], [])]
        >>> first, second = turn_samples(episode, 0.5, {"reward": 1.0}, group_id=4, version=2)
        >>> first.input_ids.tolist(), first.completion_mask.tolist(), first.old_log_probs.tolist()
        ([1, 2, 5, 6], [0, 0, 1, 0], [0.0, 0.0, -0.5, 0.0])
        >>> second.input_ids.tolist(), second.advantage, second.group_id, first.metrics, second.metrics
        ([1, 2, 5, 9, 7], 0.5, 4, {'reward': 1.0, 'env/turn_samples': 2.0}, {})
    """
    kept = [sample for sample in episode.turn_samples if any(sample.env_mask)]  # an empty turn trains nothing
    out = []
    for sample in kept:
        messages = [episode.messages[i] for i in sample.message_indices if i < len(episode.messages)]
        text = episode.turns[sample.turn].completion if sample.turn < len(episode.turns) else ""
        figures = {**metrics, "env/turn_samples": float(len(kept))} if not out else {}
        where = f"episode {episode.seed!r}, turn {sample.turn}"
        out.append(_sample(where, sample, messages, text, (advantage, version, group_id, figures)))
    return out


def episodes_to_samples(
    episodes: Sequence[Episode],
    num_generations: int,
    first_group_id: int,
    model_version: int,
    failure_reward: float | None = None,
    *,
    per_turn: bool = False,
) -> list[RolloutSample]:
    """The samples of consecutive groups of ``num_generations`` episodes (group ``k`` gets ``first_group_id + k``).

    Args:
        episodes: the episodes of one or more groups, each group's episodes consecutive and of one seed.
        num_generations: episodes per group.
        first_group_id: the ``group_id`` of the first group.
        model_version: the policy version current when the episodes started.
        failure_reward: the reward of an episode whose env failed; None leaves it out (not trained on).
        per_turn: one sample per turn sample (``history="template"``/``"window"``, :func:`turn_samples`) instead
            of one per episode; the advantage is still the episode's, over its group.

    Returns:
        One sample per scored episode (or per turn sample of each scored episode), in episode order.

    Raises:
        DataError: the episodes do not split into groups of one seed each.
    """
    if num_generations < 1 or len(episodes) % num_generations:
        raise DataError(f"{len(episodes)} episodes do not split into groups of num_generations={num_generations}")
    samples = []
    for k in range(len(episodes) // num_generations):
        group = episodes[k * num_generations : (k + 1) * num_generations]
        if len({episode.seed for episode in group}) != 1:
            raise DataError(f"group {first_group_id + k} mixes seeds {sorted({e.seed for e in group})}")
        rewards = [episode_reward(episode, failure_reward) for episode in group]
        scored = [r for r in rewards if r is not None]
        reward_std = float(np.std(scored)) if scored else float("nan")
        for episode, reward, advantage in zip(group, rewards, group_advantages(rewards), strict=True):
            if reward is None or advantage is None:
                continue
            metrics = sample_metrics(episode, reward, reward_std)
            if per_turn:
                samples += turn_samples(episode, advantage, metrics, first_group_id + k, model_version)
            else:
                samples.append(episode_sample(episode, advantage, metrics, first_group_id + k, model_version))
    return samples
