"""Training on per-turn samples (``history="template"``/``"window"``): one episode, one sample per model turn.

TRL 1.16's ``rollout_func`` returns one sample per prompt, and ``_generate_and_score_completions`` scores them
(reward functions, group advantages) by prompt. So the ``rollout_func`` still returns one row per episode, the
*carrier*: the first turn's prompt and the episode's sampled turns one after the other (no env text between them;
the turns' spans index it), which TRL scores, logs and groups exactly as a ``history="full"`` episode. Each row
also carries its ``turn_samples``; after TRL has scored the batch, :class:`~trl_env.trainer.turn_level_grpo.
TurnLevelGRPOTrainer` replaces the carriers by the turn samples (:func:`expand_turn_samples`), each with its own
prompt and sampled ids, and its turn's advantage read off the carrier's per-token advantages (``episode``: the
episode's; ``turn``/``anchor``: the turn's), so GRPO groups are still formed over episodes of one seed.

**Normalisation.** An episode weighs in the loss exactly as its one sequence does under ``history="full"`` with
the same ``loss_type``, whatever its number of turns: the loss is linear in the advantage (TRL's clipped
objectives included, for positive weights), so each turn sample's advantage is multiplied by a weight.

* token-level losses (``dapo``, TRL's default, ``bnpo``, ``cispo``, ``vespo``): weight 1 and the denominator
  ``num_items_in_batch`` is the same model-token count: the episode's tokens count as under ``full``;
* per-sequence sums (``luspo``, ``dr_grpo``): weight ``B_turns / B_episodes`` (the batch mean is over turn
  samples now);
* per-sequence means (``grpo``, ``sapo``): weight ``(N_turn / N_episode) * B_turns / B_episodes``, so an
  episode's turns add up to one sequence's mean, not one per turn.

**Cap** (``RolloutConfig.max_turn_samples``, per process and step): when the batch holds more turn samples, every
episode keeps an equal share (one turn each in turn, while it has turns left), drawn uniformly at random
without replacement (seeded by the step, so a replay draws the same) and weighted by ``turns / kept`` so that
the loss stays an unbiased estimate of the uncapped one. The sample count is then padded to a multiple of
``steps_per_generation`` (TRL splits the batch evenly) with masked copies that train nothing.

**Tree rollouts** (``RolloutConfig.tree``): a turn played before a fork is in every leaf below it. Only the copy
in the sample that owns its node under tree credit (:mod:`trl_env.trainer.tree_turns`) is trained, with the node's
advantage; the other copies (advantage 0 under ``full``) are dropped before the cap, and their tokens still count
in ``num_items_in_batch`` (``bnpo``: the advantages are scaled by the batch's tokens over those plus the copies'),
as they do under ``full``. An episode's ``N_episode`` above counts its whole path, shared turns included.

**KL** (``beta > 0``): the reference policy's logprobs are computed for each turn sample (its own prompt) and
TRL's KL term applies to its tokens unchanged. The weights above scale the advantage, not the KL term: under the
token-level losses without a cap an episode's KL counts as under ``full``; under the per-sequence losses or a cap
the KL term is averaged per turn sample (a regulariser, not credit: left as TRL computes it).

Example:
    >>> select_turns([5, 1, 3], cap=4, seed=0)
    [[3, 4], [0], [1]]
"""

from __future__ import annotations

import random
from typing import Any

import torch

from trl_env.errors import ConfigError, InvariantError
from trl_env.trainer.off_policy import importance_ratio
from trl_env.trainer.trl_compat import reference_logps

SEQUENCE_MEAN = ("grpo", "sapo")
SEQUENCE_SUM = ("luspo", "dr_grpo")
REPLACED = {
    "prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "tool_mask", "advantages", "num_items_in_batch",
    "sampling_per_token_logps", "old_per_token_logps", "importance_sampling_ratio", "ref_per_token_logps",
}  # fmt: skip


def select_turns(counts: list[int], cap: int | None, seed: int) -> list[list[int]]:
    """Which turns of each episode to train: all, or an equal share of ``cap`` drawn at random.

    Args:
        counts: the number of turn samples of each episode.
        cap: the most samples in all; None for no cap.
        seed: seeds the draw.

    Returns:
        Per episode, the kept turn positions in order.

    Example:
        >>> select_turns([2, 3], cap=None, seed=0)
        [[0, 1], [0, 1, 2]]
    """
    if cap is None or sum(counts) <= cap:
        return [list(range(n)) for n in counts]
    episodes = sum(1 for n in counts if n)
    if cap < episodes:
        raise ConfigError(f"max_turn_samples={cap} is fewer than the {episodes} episodes of this step and process")
    shares, left = [0] * len(counts), cap
    while left:  # one turn to each episode in turn, while it has turns left
        for i, n in enumerate(counts):
            if left and shares[i] < n:
                shares[i] += 1
                left -= 1
    draw = random.Random(seed)
    return [sorted(draw.sample(range(n), share)) for n, share in zip(counts, shares, strict=True)]


def _pad(rows: list[list[float]], value: float, *, left: bool, dtype: torch.dtype) -> torch.Tensor:
    width = max(len(row) for row in rows)
    padded = [[value] * (width - len(row)) + row if left else row + [value] * (width - len(row)) for row in rows]
    return torch.tensor(padded, dtype=dtype)


def _trained_tokens(trainer: Any, sample: dict[str, Any]) -> int:
    """The tokens of a turn sample the loss would train (none for a turn cut by the budget under
    ``mask_truncated_completions``, as the mask below has it)."""
    ids = sample["completion_ids"]
    if (
        trainer.mask_truncated_completions
        and ids
        and ids[-1] not in {*trainer.eos_token_ids, trainer._tokenizer.pad_token_id}
    ):
        return 0
    return int(sum(sample["env_mask"]))


def expand_turn_samples(
    trainer: Any,
    output: dict[str, Any],
    rows: list[list[dict[str, Any]]],
    *,
    cap: int | None,
    copies: list[list[bool]] | None = None,
) -> dict[str, Any]:
    """Replace the scored carriers of ``output`` by their episodes' turn samples (see the module docstring).

    Args:
        trainer: the ``GRPOTrainer`` subclass scoring the batch.
        output: what TRL's ``_generate_and_score_completions`` returned, advantages (B,) or (B, T) per carrier.
        rows: per carrier (local episode), its turn samples (``prompt_ids``, ``completion_ids``, ``logprobs``,
            ``env_mask``, ``span``: the turn's model tokens in the carrier's completion).
        cap: ``max_turn_samples``.
        copies: tree rollouts (:mod:`trl_env.trainer.tree_turns`): per carrier and turn sample, True for a copy
            of a shared turn that another carrier trains; it is dropped, and its tokens still count in the
            token denominator as its copy does under ``history="full"``. None: no copies.

    Returns:
        A new output dict over the turn samples.
    """
    unknown = [key for key, value in output.items() if key not in REPLACED and value is not None]
    if unknown:
        raise ConfigError(f"per-turn samples do not support the batch entries {unknown} (multimodal inputs)")
    advantages = output["advantages"]
    copies = copies if copies is not None else [[False] * len(row) for row in rows]
    owned = [
        [s for s, copy in zip(row, flags, strict=True) if not copy] for row, flags in zip(rows, copies, strict=True)
    ]
    dropped = [s for row, flags in zip(rows, copies, strict=True) for s, copy in zip(row, flags, strict=True) if copy]
    seed = int(trainer.state.global_step) * 1009 + int(trainer.accelerator.process_index)
    kept = select_turns([len(row) for row in owned], cap, seed)
    chosen: list[tuple[dict[str, Any], float, float]] = []  # sample, advantage, weight
    for index, (row, mine, keep) in enumerate(zip(rows, owned, kept, strict=True)):
        episode_tokens = sum(sum(sample["env_mask"]) for sample in row) or 1  # its full sequence's, copies included
        for position in keep:
            sample = mine[position]
            start = sample["span"][0]
            if advantages.dim() == 1:
                value = advantages[index]
            else:  # a turn with no sampled token trains nothing: any value will do
                value = advantages[index, start] if start < advantages.shape[1] else 0.0
            weight = len(mine) / len(keep)
            if trainer.loss_type in SEQUENCE_MEAN:
                weight *= sum(sample["env_mask"]) / episode_tokens
            chosen.append((sample, float(value), weight))
    if not chosen and dropped:  # every turn a copy nobody trains (all failed): one masked row for TRL's batch
        chosen.append(({**dropped[0], "env_mask": [0] * len(dropped[0]["env_mask"])}, 0.0, 0.0))
    if not chosen:
        raise InvariantError("a per-turn batch without any turn sample")
    copied_tokens = sum(_trained_tokens(trainer, sample) for sample in dropped)
    steps = int(trainer.args.steps_per_generation)
    filler = chosen[-1][0]
    while len(chosen) % steps:  # TRL splits the batch into equal parts: masked copies that train nothing
        chosen.append(({**filler, "env_mask": [0] * len(filler["env_mask"])}, 0.0, 0.0))
    if trainer.loss_type in SEQUENCE_MEAN + SEQUENCE_SUM:
        scale = len(chosen) / len(rows)
        chosen = [(sample, value, weight * scale) for sample, value, weight in chosen]
    device = output["completion_ids"].device
    samples = [sample for sample, _, _ in chosen]
    prompt_ids = _pad([s["prompt_ids"] for s in samples], trainer._tokenizer.pad_token_id, left=True, dtype=torch.long)
    prompt_mask = _pad([[1] * len(s["prompt_ids"]) for s in samples], 0, left=True, dtype=torch.long)
    ids = [s["completion_ids"] for s in samples]
    completion_ids = _pad(ids, trainer._tokenizer.pad_token_id, left=False, dtype=torch.long)
    completion_mask = _pad([[1] * len(i) for i in ids], 0, left=False, dtype=torch.long)
    tool_mask = _pad([list(s["env_mask"]) for s in samples], 0, left=False, dtype=torch.long)
    if trainer.mask_truncated_completions:  # as TRL does for whole samples: a turn cut by the budget trains nothing
        ends = {*trainer.eos_token_ids, trainer._tokenizer.pad_token_id}
        tool_mask[[row[-1] not in ends for row in ids]] = 0
    weights = torch.tensor([value * weight for _, value, weight in chosen], dtype=torch.float32)
    new: dict[str, Any] = {
        "prompt_ids": prompt_ids.to(device),
        "prompt_mask": prompt_mask.to(device),
        "completion_ids": completion_ids.to(device),
        "completion_mask": completion_mask.to(device),
        "tool_mask": tool_mask.to(device),
        "advantages": weights.unsqueeze(1).expand(-1, completion_ids.shape[1]).contiguous().to(device),
        "sampling_per_token_logps": _pad([s["logprobs"] for s in samples], 0.0, left=False, dtype=torch.float32).to(
            device
        ),
    }
    token_weights = torch.tensor([weight for _, _, weight in chosen], dtype=torch.float32)
    if trainer.loss_type in SEQUENCE_MEAN + SEQUENCE_SUM:
        token_weights = torch.ones_like(token_weights)  # the weights above already carry the batch scale
    if trainer.loss_type == "bnpo" and copied_tokens:  # its denominator is the batch's own mask: add the copies'
        trained = float(tool_mask.sum())
        new["advantages"] = new["advantages"] * (trained / (trained + copied_tokens))
    local_items = ((tool_mask.float().sum(1) * token_weights).sum() + copied_tokens).to(device)
    new["num_items_in_batch"] = trainer.accelerator.gather(local_items).sum()
    sequences = torch.cat([new["prompt_ids"], new["completion_ids"]], dim=1)  # what a forward pass over the turns reads
    mask = torch.cat([new["prompt_mask"], new["completion_mask"]], dim=1)
    if output.get("old_per_token_logps") is not None:  # TRL computed them for the carriers: now for the turns
        with torch.no_grad():
            new["old_per_token_logps"], _, _ = trainer._get_per_token_logps_and_entropies(
                trainer.model, sequences, mask, completion_ids.size(1), trainer.args.per_device_train_batch_size
            )
    if output.get("ref_per_token_logps") is not None:  # beta > 0: the reference policy's, for the turns
        new["ref_per_token_logps"] = reference_logps(trainer, sequences, mask, completion_ids.size(1))
    if output.get("importance_sampling_ratio") is not None:  # TRL's vLLM correction, for the turns
        new["importance_sampling_ratio"], _ = importance_ratio(
            new["old_per_token_logps"],
            new["sampling_per_token_logps"],
            (new["completion_mask"] * new["tool_mask"]).float(),
            mode=trainer.vllm_importance_sampling_mode,
            clip_min=trainer.vllm_importance_sampling_clip_min,
            clip_max=trainer.vllm_importance_sampling_clip_max,
        )
    return new
