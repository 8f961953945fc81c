"""Building small real GRPOTrainers for tests."""

from __future__ import annotations

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from trl_env import env_reward


class ThreeTurnEnv:
    """Three turns; the reward depends on the answers' lengths, so a group's rewards differ."""

    def __init__(self):
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed):
        return self, f"Episode {seed}. Say something."

    def step(self, action):
        self.turn += 1
        self.reward += (len(action) % 5) / 5
        self.alive = self.turn < 3
        return self, f"Turn {self.turn} done."


def make_trainer(model, tokenizer, rollout_func, tmp_path, *, reward_funcs=None, steps=2, **config):
    settings = dict(
        output_dir=str(tmp_path),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=48,
        max_steps=steps,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
        seed=0,
    )
    settings.update(config)
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward_funcs or [env_reward],
        args=GRPOConfig(**settings),
        train_dataset=Dataset.from_dict({"prompt": [f"seed-{i}" for i in range(32)]}),
        rollout_func=rollout_func,
    )
