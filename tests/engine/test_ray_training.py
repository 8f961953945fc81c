"""One real GRPO training step whose envs run as Ray actors on the session's two-node loopback cluster."""

from __future__ import annotations

import pytest
from grpo_helpers import make_trainer

from tests.envs.basic import ThreeTurnEnv
from trl_env import make_rollout_func
from trl_env.testing import build_tiny_qwen3_model

pytest.importorskip("ray")


def test_a_grpo_step_with_envs_on_ray(ray_cluster, qwen3_tokenizer, tmp_path):
    rollout_func = make_rollout_func(
        ThreeTurnEnv, max_turns=3, max_turn_tokens=6, env_isolation="ray", ray_resources={"num_cpus": 0}
    )
    trainer = make_trainer(
        build_tiny_qwen3_model(qwen3_tokenizer, seed=1), qwen3_tokenizer, rollout_func, tmp_path, steps=1
    )
    trainer.train()
    logged = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert trainer.state.global_step == 1 and logged and logged[0].get("env/errors", 0) == 0
