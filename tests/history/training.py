"""A real TurnLevelGRPOTrainer step on a rollout function, recording what the loss saw (per-turn history tests)."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from datasets import Dataset
from trl import GRPOConfig

from trl_env import env_reward
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer


def train_one_step(model, tokenizer, rollout_func, tmp_path, *, generations=4, beta=0.0, **kwargs):
    """One real TurnLevelGRPOTrainer step; returns the rollout batches, what the loss saw, and the trainer."""
    batches, seen = [], []

    def recorded(prompts, trainer):
        batches.append(rollout_func(prompts, trainer))
        return batches[-1]

    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=generations, num_generations=generations,
        max_completion_length=1024, max_steps=1, learning_rate=1e-3, beta=beta, logging_steps=1, report_to="none",
        use_cpu=True, save_strategy="no", bf16=False, seed=0,
    )  # fmt: skip
    trainer = TurnLevelGRPOTrainer(
        model=model, processing_class=tokenizer, reward_funcs=[env_reward], args=args,
        train_dataset=Dataset.from_dict({"prompt": ["seed-0"] * 8}), rollout_func=recorded, **kwargs,
    )  # fmt: skip
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        seen.append({key: value.detach().clone() for key, value in inputs.items() if torch.is_tensor(value)})
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    return batches[0], seen[0], trainer


def loss_rows(seen):
    """The loss batch's rows as (prompt ids, completion ids, advantage, trained-token mask), padding removed."""
    rows = []
    for k in range(seen["prompt_ids"].shape[0]):
        prompt = seen["prompt_ids"][k][seen["prompt_mask"][k].bool()].tolist()
        completion = seen["completion_ids"][k][seen["completion_mask"][k].bool()].tolist()
        rows.append((prompt, completion, seen["advantages"][k], seen["tool_mask"][k]))
    return rows


def fake_trainer(loss_type, steps=1):
    """What expand_turn_samples reads of a trainer, for its unit tests of the normalisation."""
    return SimpleNamespace(
        loss_type=loss_type, args=SimpleNamespace(steps_per_generation=steps, per_device_train_batch_size=4),
        state=SimpleNamespace(global_step=0), accelerator=SimpleNamespace(process_index=0, gather=lambda t: t),
        _tokenizer=SimpleNamespace(pad_token_id=0), mask_truncated_completions=False, eos_token_ids=[9],
    )  # fmt: skip
