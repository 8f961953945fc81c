"""Episodes into the dict a TRL ``rollout_func`` returns, with the per-turn columns turn-level credit reads.

Example:
    >>> from trl_env.episode import Episode
    >>> sorted(episodes_to_batch([Episode(seed="s", prompt_ids=[1], prompt_text="")], turn_end_id=2))[:3]
    ['completion_ids', 'env_mask', 'env_reward']
"""

from __future__ import annotations

import hashlib
from typing import Any

from trl_env.episode import Episode
from trl_env.errors import InvariantError


def state_keys(prompt_text: str, turns: list[Any]) -> list[str]:
    """The anchor state each turn starts from: a short hash of the observation history before it.

    Turns that start from equal histories share a key. One digest is carried along the turns, so an
    episode of ``n`` turns hashes its history once, not ``n`` times.

    Example:
        >>> from types import SimpleNamespace
        >>> turns = [SimpleNamespace(action="4", observation="Higher."), SimpleNamespace(action="6", observation="")]
        >>> keys = state_keys("p", turns)
        >>> len(keys), keys[0] != keys[1], keys == state_keys("p", turns), keys[0] != state_keys("q", turns)[0]
        (2, True, True, True)
    """
    digest = hashlib.blake2b(prompt_text.encode("utf-8"), digest_size=8)
    keys = []
    for turn in turns:
        keys.append(digest.hexdigest())  # hexdigest() leaves the digest open for the next turn
        digest.update(b"\x00" + turn.action.encode("utf-8") + b"\x01" + turn.observation.encode("utf-8"))
    return keys


def episodes_to_batch(
    episodes: list[Episode], turn_end_id: int, failure_reward: float | None = None
) -> dict[str, list[Any]]:
    """Turn episodes into the dict a TRL 1.16 ``rollout_func`` returns.

    An episode with no completion tokens (its env failed at reset) gets one end-of-turn
    token with mask 0, so it is a finished sample that trains nothing. A failed episode's
    ``env_reward`` is None (unscorable) unless ``failure_reward`` is set. Per-turn columns for
    turn-level credit (:mod:`trl_env.trainer.turn_level_grpo`): ``turn_rewards``, ``turn_spans``,
    ``state_keys`` and ``failed``; for tree rollouts (mode ``"tree"``), ``tree_nodes`` and ``tree_branch_points``
    (empty lists for plain episodes); under ``history="template"``/``"window"``, ``turn_samples``
    (:mod:`trl_env.trainer.turn_samples`).

    Example:
        >>> batch = episodes_to_batch([Episode(seed="s", prompt_ids=[1], prompt_text="")], turn_end_id=2)
        >>> batch["completion_ids"], batch["env_mask"]
        ([[2]], [[0]])
    """
    batch: dict[str, list[Any]] = {
        key: []
        for key in (
            "prompt_ids",
            "completion_ids",
            "logprobs",
            "env_mask",
            "env_reward",
            "num_turns",
            "transcript",
            "turn_rewards",
            "turn_spans",
            "state_keys",
            "failed",
            "tree_nodes",
            "tree_branch_points",
        )
    }
    for episode in episodes:
        if not episode.completion_ids:
            episode.add_env_tokens([turn_end_id], "")
        if not (len(episode.completion_ids) == len(episode.env_mask) == len(episode.logprobs)):
            raise InvariantError(f"episode {episode.seed!r}: per-token lists differ in length")
        batch["prompt_ids"].append(episode.prompt_ids)
        batch["completion_ids"].append(episode.completion_ids)
        batch["logprobs"].append(episode.logprobs)
        batch["env_mask"].append(episode.env_mask)
        batch["env_reward"].append(None if episode.failed and failure_reward is None else episode.reward)
        batch["num_turns"].append(episode.num_turns)
        batch["transcript"].append(episode.text)
        batch["turn_rewards"].append([0.0 if t.reward is None else t.reward for t in episode.turns])
        batch["turn_spans"].append([list(t.span) for t in episode.turns])
        batch["state_keys"].append(state_keys(episode.prompt_text, episode.turns))
        batch["failed"].append(episode.failed)
        batch["tree_nodes"].append(list(episode.tree_nodes))
        batch["tree_branch_points"].append(list(episode.tree_branch_points))
    if any(episode.turn_samples for episode in episodes):  # history="template"/"window": one sample per turn
        batch["turn_samples"] = [turn_sample_rows(episode) for episode in episodes]
    return batch


def turn_sample_rows(episode: Episode) -> list[dict[str, Any]]:
    """The episode's turn samples as plain dicts, each with its turn's ``span`` in the episode's completion.

    Example:
        >>> turn_sample_rows(Episode(seed="s", prompt_ids=[1], prompt_text=""))
        []
    """
    return [
        {
            "turn": sample.turn,
            "prompt_ids": sample.prompt_ids,
            "completion_ids": sample.completion_ids,
            "logprobs": sample.logprobs,
            "env_mask": sample.env_mask,
            "span": list(episode.turns[sample.turn].span),
        }
        for sample in episode.turn_samples
    ]
