"""Building small real GRPOTrainers for tests."""

from __future__ import annotations

from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from tests.envs.basic import ThreeTurnEnv  # noqa: F401
from trl_env import env_reward


def make_trainer(
    model,
    tokenizer,
    rollout_func,
    tmp_path,
    *,
    reward_funcs=None,
    steps=2,
    prompts=None,
    trainer_class=GRPOTrainer,
    trainer_kwargs=None,
    callbacks=(),
    **config,
):
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
    return trainer_class(
        **(trainer_kwargs or {}),
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward_funcs or [env_reward],
        args=GRPOConfig(**settings),
        train_dataset=Dataset.from_dict({"prompt": prompts or [f"seed-{i}" for i in range(32)]}),
        rollout_func=rollout_func,
        callbacks=list(callbacks),
    )
