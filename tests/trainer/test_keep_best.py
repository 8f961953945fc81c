"""Ending on the best stretch of training: the weights that sampled it are the ones left, on a real GRPOTrainer."""

from __future__ import annotations

import copy

import pytest
import torch
from grpo_helpers import ThreeTurnEnv, make_trainer
from transformers import TrainerCallback

from trl_env import make_rollout_func
from trl_env.errors import ConfigError
from trl_env.trainer.keep_best import KeepBestWeights, kept_best
from trl_env.trainer.sampled_token_scoring import SampledTokenGRPOTrainer


class WeightsSeen(TrainerCallback):
    """The weights each step started from, and those training ended with (before any restore)."""

    def __init__(self) -> None:
        self.at_step_start: list[dict[str, torch.Tensor]] = []
        self.trained: dict[str, torch.Tensor] = {}

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        self.at_step_start.append({n: p.detach().clone() for n, p in model.named_parameters()})

    def on_train_end(self, args, state, control, model=None, **kwargs):
        self.trained = {n: p.detach().clone() for n, p in model.named_parameters()}


def _same(weights: dict[str, torch.Tensor], model) -> bool:
    return all(torch.equal(weights[n], p) for n, p in model.named_parameters())


def test_the_model_ends_on_the_weights_that_sampled_the_best_step(tiny_qwen3, qwen3_tokenizer, tmp_path):
    seen, keep = WeightsSeen(), KeepBestWeights(metric="reward", window=1)
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=4)
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=4, callbacks=[seen, keep]
    )
    trainer.train()
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    best = rewards.index(max(rewards))  # ties: the earliest
    assert kept_best(trainer) == {
        "metric": "reward", "window": 1, "best": max(rewards), "step": best + 1, "restored": True, "steps": 4
    }  # fmt: skip
    assert _same(seen.at_step_start[best], trainer.model)
    assert not _same(seen.trained, trainer.model)  # every step moved the weights: the last ones were replaced


def test_a_metric_the_trainer_does_not_log_is_named_at_the_first_step(tiny_qwen3, qwen3_tokenizer, tmp_path):
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=4)
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=2,
        callbacks=[KeepBestWeights(metric="env/succes_rate")],
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"the trainer's logs have no 'env/succes_rate'; logged are .*env/"):
        trainer.train()


def test_with_num_iterations_only_the_steps_that_sampled_episodes_are_ranked(tiny_qwen3, qwen3_tokenizer, tmp_path):
    seen, keep = WeightsSeen(), KeepBestWeights(metric="reward", window=1)
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=4)
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=4, callbacks=[seen, keep],
        trainer_class=SampledTokenGRPOTrainer, num_iterations=2,
    )  # fmt: skip
    trainer.train()
    logged = [entry.get("reward") for entry in trainer.state.log_history if "loss" in entry]
    assert [reward is not None for reward in logged] == [True, False, True, False]  # steps 2 and 4 reuse a batch
    best = 0 if logged[0] >= logged[2] else 2  # ties: the earlier
    assert kept_best(trainer)["step"] == best + 1 and kept_best(trainer)["steps"] == 2
    assert _same(seen.at_step_start[best], trainer.model)
    # a batch's first pass is computed by the weights that sampled it: its ratio is 1, nothing is clipped
    clipped = [entry["clip_ratio/region_mean"] for entry in trainer.state.log_history if "loss" in entry]
    assert clipped[0] == 0 and clipped[2] == 0
