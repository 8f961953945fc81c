"""A learning rate that decays over the run's minutes, on a real GRPOTrainer (a simulated clock) and the recipe."""

from __future__ import annotations

import copy

import pytest
import torch
from grpo_helpers import ThreeTurnEnv, make_trainer
from transformers import TrainerCallback

from tests.envs.basic import Counting
from trl_env import make_rollout_func
from trl_env.engine.config import RolloutConfig
from trl_env.errors import ConfigError
from trl_env.trainer.recipe import TrainSettings, build_trainer
from trl_env.trainer.wall_clock import LinearDecayOverMinutes

BASE_LR = 1e-3


class SimulatedClock(TrainerCallback):
    """Each optimizer step takes 15 simulated seconds; records the rate the optimizer stepped with."""

    def __init__(self) -> None:
        self.now = 0.0
        self.stepped_at: list[float] = []

    def __call__(self) -> float:
        return self.now

    def on_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
        self.stepped_at.append(optimizer.param_groups[0]["lr"])
        self.now += 15.0


def test_each_step_trains_at_the_rate_left_by_the_minutes_not_by_max_steps(tiny_qwen3, qwen3_tokenizer, tmp_path):
    clock = SimulatedClock()
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=4)
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=3, max_completion_length=48,
        learning_rate=BASE_LR, callbacks=[clock, LinearDecayOverMinutes(1.0, clock=clock)],
    )  # fmt: skip
    trainer.train()
    # 1 minute, 15 s a step: each step at the rate left at its start, and the log says so; TRL's linear
    # schedule over max_steps=3 would have stepped at 1, 2/3 and 1/3
    assert clock.stepped_at == pytest.approx([BASE_LR, 0.75 * BASE_LR, 0.5 * BASE_LR])
    logged = [entry["learning_rate"] for entry in trainer.state.log_history if "learning_rate" in entry]
    assert logged == pytest.approx(clock.stepped_at)


def test_a_schedule_without_a_factor_is_refused_at_the_first_step(tiny_qwen3, qwen3_tokenizer, tmp_path):
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=4)
    model = copy.deepcopy(tiny_qwen3)
    optimizer = torch.optim.AdamW(model.parameters(), lr=BASE_LR)
    trainer = make_trainer(
        model, qwen3_tokenizer, rollout_func, tmp_path, steps=1, callbacks=[LinearDecayOverMinutes(1.0)],
        trainer_kwargs={"optimizers": (optimizer, torch.optim.lr_scheduler.StepLR(optimizer, step_size=1))},
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"the trainer's scheduler is StepLR \(lr_scheduler_type 'linear'\)"):
        trainer.train()


def test_the_recipe_decays_over_max_minutes_in_real_time(tiny_qwen3, qwen3_tokenizer, tmp_path):
    settings = TrainSettings(
        steps=2, lr=BASE_LR, num_generations=4, prompts_per_step=1, lora_r=0, output_dir=str(tmp_path),
        max_minutes=5.0, lr_decay="minutes", rollout=RolloutConfig(max_turns=2, max_turn_tokens=4),
    )  # fmt: skip
    trainer = build_trainer(Counting, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, ["s"], settings)
    trainer.train()
    logged = [entry["learning_rate"] for entry in trainer.state.log_history if "learning_rate" in entry]
    # the first step at the initial rate, the second a few seconds of 5 minutes later, just under it (TRL's
    # linear schedule over steps=2 would have logged 1e-3 and 5e-4)
    assert len(logged) == 2 and logged[0] == pytest.approx(BASE_LR) and 0.9 * BASE_LR < logged[1] < BASE_LR


@pytest.mark.parametrize(
    ("lr_decay", "max_minutes", "message"),
    [
        ("minutes", None, "lr_decay='minutes' decays the learning rate over max_minutes, which is None"),
        ("hours", 5.0, "lr_decay='hours' is not one of 'steps'"),
    ],
)
def test_the_recipe_refuses_a_decay_it_cannot_run(lr_decay, max_minutes, message, tiny_qwen3, qwen3_tokenizer):
    settings = TrainSettings(steps=1, num_generations=4, prompts_per_step=1, lora_r=0, max_minutes=max_minutes,
                             lr_decay=lr_decay)  # fmt: skip
    with pytest.raises(ConfigError, match=message):
        build_trainer(Counting, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, ["s"], settings)
