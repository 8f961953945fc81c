"""Failed episodes under a real GRPOTrainer: unscorable (out of the group baseline), and loud when all fail."""

from __future__ import annotations

import copy

import pytest
import torch
from grpo_helpers import make_trainer

from tests.envs.basic import FailsAtReset, NumberedEnv
from trl_env import TrlEnvError, make_rollout_func
from trl_env.trainer.failures import EnvFailuresError


def test_a_failed_episode_is_unscorable_and_left_out_of_its_groups_baseline(qwen3_tokenizer, tiny_qwen3, tmp_path):
    NumberedEnv.made = 0
    # threads: NumberedEnv numbers its instances within one process
    inner = make_rollout_func(NumberedEnv, max_turns=2, max_turn_tokens=3, env_isolation="thread")
    batches = []

    def rollout_func(prompts, trainer):
        batches.append(inner(prompts, trainer))
        return batches[-1]

    trainer = make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1)
    seen = []
    original = trainer._generate_and_score_completions

    def spy(inputs):
        output = original(inputs)
        seen.append(output["advantages"].detach().clone())
        return output

    trainer._generate_and_score_completions = spy
    trainer.train()
    advantages = seen[0].reshape(-1)
    batch = batches[0]
    # one group of 4 episodes with rewards {0, 1, 3} and one failed: it gets None, advantage 0, and is left out
    failed = [i for i, flag in enumerate(batch["failed"]) if flag]
    scored = [i for i, flag in enumerate(batch["failed"]) if not flag]
    assert len(failed) == 1 and batch["env_reward"][failed[0]] is None
    assert sorted(batch["env_reward"][i] for i in scored) == [0.0, 1.0, 3.0]
    rewards = torch.tensor([batch["env_reward"][i] for i in scored])
    expected = (rewards - rewards.mean()) / (rewards.std() + 1e-4)
    assert advantages[failed[0]] == 0.0
    assert torch.allclose(advantages[scored], expected, atol=1e-5)


def test_training_stops_with_the_first_errors_when_every_episode_fails(qwen3_tokenizer, tiny_qwen3, tmp_path):
    rollout_func = make_rollout_func(FailsAtReset, max_turns=2, max_turn_tokens=3)
    trainer = make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1)
    with pytest.raises(
        EnvFailuresError, match=r"(?s)every episode of this step failed \(4 of 4\).*FailsAtReset \(seed="
    ):
        trainer.train()
    with pytest.raises(TrlEnvError, match="ValueError: invalid literal for int") as caught:  # the family's base
        make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1).train()
    assert caught.type is EnvFailuresError and isinstance(caught.value, RuntimeError)
