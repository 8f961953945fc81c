"""``TurnLevelGRPOTrainer``: TRL 1.16's ``GRPOTrainer`` with per-token, turn-level advantages.

The ``rollout_func`` returns, besides TRL's keys, one entry per sample of ``turn_rewards``,
``turn_spans``, ``state_keys`` and ``failed``. TRL 1.16 copies such extra keys onto each input row
(``_generate_and_score_completions``: "Merge extra_fields from rollout_func into inputs") before
it calls ``_calculate_rewards``, and ``_compute_loss`` accepts (B, T) advantages (it unsqueezes only
1-D ones). So two small overrides suffice:

* ``_calculate_rewards`` marks ``failed`` rows NaN, TRL's own "unscorable" signal: they leave the
  group baseline and get advantage 0, in every mode (and so do rows whose reward functions all
  returned None);
* ``_generate_and_score_completions`` replaces ``output["advantages"]`` with the (B, T) tensor of
  :func:`~trl_env.trainer.advantages.compute_advantages` (and, under ``history="template"``/``"window"``, the
  episodes by their turn samples: :mod:`~trl_env.trainer.turn_samples`; with a tree, a shared turn is trained
  in one carrier only: :mod:`~trl_env.trainer.tree_turns`). Mode ``"episode"`` keeps TRL's own (B,)
  advantages (identical, see the tests); ``"anchor"`` uses them as its episode term, ``"tree"`` as its
  leaf advantages (a shared prefix gets the mean of its scorable leaves', once).

Mode ``"tree"`` (tree rollouts) also needs, per sample, ``tree_nodes`` (the ids of the shared prefixes the
sample passes through, root first; unique within the batch) and ``tree_branch_points`` (the completion
offset where each of them ends): see :mod:`trl_env.trainer.tree_advantages`. A sample with empty lists
is a plain episode.

Example:
    >>> TurnLevelGRPOTrainer(advantage_mode="sideways")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigError: advantage_mode must be one of ('episode', 'turn', 'anchor', 'tree'); got 'sideways'
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer

from trl_env.errors import ConfigError, TrlEnvError
from trl_env.trainer.advantages import MODES, AdvantageMode, EpisodeCredit, compute_advantages
from trl_env.trainer.off_policy import correct_off_policy
from trl_env.trainer.sampled_token_scoring import SampledTokenScoring
from trl_env.trainer.tree_turns import shared_turn_copies
from trl_env.trainer.turn_samples import expand_turn_samples

CREDIT_KEYS = ("turn_rewards", "turn_spans", "state_keys")
TREE_KEYS = ("tree_nodes", "tree_branch_points")


class MissingColumnsError(TrlEnvError, KeyError):
    """The rollout function did not return the per-sample columns the advantage mode needs."""


class TurnLevelGRPOTrainer(SampledTokenScoring, GRPOTrainer):
    """``GRPOTrainer`` whose loss sees turn-level (B, T) advantages; other arguments as ``GRPOTrainer``.

    Args:
        advantage_mode: ``"episode"``, ``"turn"``, ``"anchor"`` or ``"tree"`` (see :mod:`trl_env.trainer.advantages`).
        gamma: discount of the turn returns.
        step_weight: weight ``w`` of the anchor step term.
        scale_turns: divide ``"turn"`` advantages by the turn index's std.
    """

    def __init__(
        self,
        *args: Any,
        advantage_mode: AdvantageMode = "turn",
        gamma: float = 1.0,
        step_weight: float = 1.0,
        scale_turns: bool = True,
        **kwargs: Any,
    ) -> None:
        if advantage_mode not in MODES:
            raise ConfigError(f"advantage_mode must be one of {MODES}; got {advantage_mode!r}")
        self.advantage_mode = advantage_mode
        self.gamma, self.step_weight, self.scale_turns = gamma, step_weight, scale_turns
        self._credits: list[EpisodeCredit] = []
        self._scored_credits: list[EpisodeCredit] = []  # every process's, unscorable ones failed: the last batch's
        self._groups = 1  # the last batch's num_generations
        self._unscorable: list[bool] = []
        self._turn_samples: list[Any] = []
        self._turn_cap: int | None = None
        super().__init__(*args, **kwargs)

    def _calculate_rewards(
        self, inputs: list[dict[str, Any]], prompts: list[Any], completions: list[Any], completion_ids_list: list[Any]
    ) -> torch.Tensor:
        # TRL merged the rollout_func's extra keys into `inputs` just before calling this
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        local_failed = [bool(row.get("failed", False)) for row in inputs]
        self._turn_samples = [row.get("turn_samples") for row in inputs]
        self._turn_cap = inputs[0].get("max_turn_samples") if inputs else None  # the same on every row
        if self.advantage_mode != "episode":
            self._credits = [
                _credit(row, len(ids), i, tree=self.advantage_mode == "tree")
                for i, (row, ids) in enumerate(zip(inputs, completion_ids_list, strict=True))
            ]
        # rewards_per_func is gathered across processes; so must the flags be
        failed = torch.tensor(gather_object(local_failed), dtype=torch.bool, device=rewards_per_func.device)
        rewards_per_func[failed] = torch.nan
        # a row is failed for the turn modes too when every reward function returned None (TRL's "unscorable")
        self._unscorable = torch.isnan(rewards_per_func).all(dim=1).tolist()
        return rewards_per_func

    corrects_off_policy = True  # pipelined rollouts (make_rollout_func(max_staleness=N)) may train with it
    samples_off_policy = False  # set by a pipelined rollout_func at its first call: correct every batch
    trains_turn_samples = True  # history="template"/"window" (trl_env.trainer.turn_samples) may train with it

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        if self.advantage_mode != "episode":
            output["advantages"] = self._turn_advantages(output)
        if any(rows is not None for rows in self._turn_samples):  # per-turn histories: the turns replace the carriers
            rows = [rows or [] for rows in self._turn_samples]
            copies = None
            if self.advantage_mode == "tree":  # a shared turn is trained in the one carrier that owns its node
                first = self.accelerator.process_index * len(rows)  # TRL's process_slice
                copies = shared_turn_copies(self._scored_credits, self._groups, first, rows)
            cap = self._turn_cap if self.model.training else None
            output = expand_turn_samples(self, output, rows, cap=cap, copies=copies)
        if self.samples_off_policy and self.model.training:
            correct_off_policy(self, output)
        return output

    def _turn_advantages(self, output: dict[str, Any]) -> torch.Tensor:
        mode = "train" if self.model.training else "eval"
        num_generations = self.num_generations if mode == "train" else self.num_generations_eval
        local = output["advantages"]
        credits = [
            replace(credit, failed=True) if unscorable else credit
            for credit, unscorable in zip(gather_object(self._credits), self._unscorable, strict=True)
        ]
        self._scored_credits, self._groups = credits, num_generations
        advantages = compute_advantages(
            credits,
            num_generations,
            self.advantage_mode,
            gamma=self.gamma,
            step_weight=self.step_weight,
            scale=self.scale_turns,
            episode=self.accelerator.gather(local).cpu(),
        )
        start = self.accelerator.process_index * len(local)  # TRL's process_slice
        width = output["completion_ids"].shape[1]
        mine = torch.zeros(len(local), width, dtype=torch.float32)
        columns = min(width, advantages.shape[1])
        mine[:, :columns] = advantages[start : start + len(local), :columns]
        return mine.to(local.device)


def _credit(row: dict[str, Any], completion_length: int, index: int, *, tree: bool = False) -> EpisodeCredit:
    """The :class:`EpisodeCredit` of one input row that TRL merged the rollout_func's extra keys into."""
    keys = CREDIT_KEYS + TREE_KEYS if tree else CREDIT_KEYS
    missing = [key for key in keys if key not in row]
    if missing:
        raise MissingColumnsError(
            f"sample {index}: the rollout_func must return {list(keys)} (one entry per sample) for "
            f"TurnLevelGRPOTrainer{' in mode tree' if tree else ''}; missing {missing}"
        )
    return EpisodeCredit(
        turn_rewards=list(row["turn_rewards"]),
        turn_spans=[tuple(span) for span in row["turn_spans"]],
        state_keys=list(row["state_keys"]),
        completion_length=completion_length,
        failed=bool(row.get("failed", False)),
        tree_nodes=list(row["tree_nodes"]) if tree else (),
        tree_branch_points=[int(point) for point in row["tree_branch_points"]] if tree else (),
    )
