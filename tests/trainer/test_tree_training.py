"""Tree rollouts through make_rollout_func and TurnLevelGRPOTrainer: a real GRPO step, prefixes credited once."""

from __future__ import annotations

import copy
import functools
import warnings

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig

from tests.envs.basic import Latency
from trl_env import ChatTemplateProcessor, env_reward, make_rollout_func
from trl_env.engine.tree import TreeShape
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer


def test_a_tree_rollout_trains_with_each_shared_prefix_credited_once(qwen3_tokenizer, tiny_qwen3, tmp_path):
    factory = functools.partial(Latency, mix=((0.0, 1.0),), turns=2)
    rollout_func = make_rollout_func(
        factory,
        ChatTemplateProcessor(qwen3_tokenizer),
        max_turns=2,
        max_turn_tokens=4,
        tree=TreeShape((1,), 2),
        env_isolation="thread",
    )
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=64,
        max_steps=1, learning_rate=1e-3, beta=0.0, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", bf16=False, seed=0,
    )  # fmt: skip
    trainer = TurnLevelGRPOTrainer(
        advantage_mode="tree",
        model=copy.deepcopy(tiny_qwen3),
        processing_class=qwen3_tokenizer,
        reward_funcs=[env_reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["seed-0"] * 8}),
        rollout_func=rollout_func,
    )
    seen = []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        seen.append({key: inputs[key].detach().clone() for key in ("advantages", "completion_ids")})
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # no "trainer does not credit trees" warning
        trainer.train()
    ids, advantages = seen[0]["completion_ids"], seen[0]["advantages"]
    log = next(entry for entry in trainer.state.log_history if "env/turns_mean" in entry)
    assert log["env/turns_mean"] == 2  # every leaf played both turns: the fork happened
    assert advantages.shape == ids.shape
    rows = {tuple(row.tolist()): k for k, row in enumerate(ids)}
    assert len(rows) == 4
    # siblings share their first turn: exactly one of the two copies carries its credit, the other 0
    first_turns = {}
    for k, row in enumerate(ids.tolist()):
        first_turns.setdefault(tuple(row[:4]), []).append(k)
    for siblings in first_turns.values():
        if len(siblings) == 2:
            credited = [bool(advantages[k, :4].abs().sum() > 0) for k in siblings]
            assert sorted(credited) in ([False, True], [False, False])  # [False, False]: the prefix's mean is 0
    assert torch.isfinite(advantages).all()
    assert trainer.state.global_step == 1


def test_build_trainer_names_a_group_size_the_tree_does_not_divide(qwen3_tokenizer, tiny_qwen3, tmp_path):
    from trl_env.engine.config import RolloutConfig
    from trl_env.trainer.recipe import TrainSettings, build_trainer

    settings = TrainSettings(
        steps=1,
        num_generations=6,
        prompts_per_step=1,
        output_dir=str(tmp_path),
        advantage="tree",
        rollout=RolloutConfig(max_turns=2, tree=TreeShape((1,), 4)),
    )
    with pytest.raises(ValueError, match="num_generations=6 is not a multiple of the 4 leaves per root"):
        build_trainer(Latency, tiny_qwen3, qwen3_tokenizer, ["s"] * 8, settings)
