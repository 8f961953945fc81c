"""The trainer's generator is built in one place: build_trainer and make_rollout_func sample alike."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from examples.guess_number import GuessNumberEnv
from trl_env import (
    ChatTemplateProcessor,
    EpisodeCacheGenerator,
    TransformersGenerator,
    env_reward,
    make_rollout_func,
)
from trl_env.engine.config import RolloutConfig
from trl_env.testing import build_tiny_qwen3_model
from trl_env.trainer.recipe import TrainSettings, build_trainer
from trl_env.trainer.sampling import SamplingSettings

SAMPLING = {"top_p": 0.9, "top_k": 30}
# the turn schedule batches every live episode in seed order: the same seed gives the same tokens
ROLLOUT = {"max_turns": 2, "max_turn_tokens": 5, "env_isolation": "thread", "schedule": "turn"}
PROMPTS = ["3", "3", "9", "9"]


def settings_of(generator) -> dict:
    names = ("temperature", "top_p", "top_k", "min_p", "repetition_penalty", "stop_token_ids")
    return {"class": type(generator).__name__, **{name: getattr(generator, name) for name in names}}


def first_rollout(trainer):
    torch.manual_seed(0)
    batch = trainer.rollout_func(PROMPTS, trainer)
    return trainer.rollout_func.engine.generator, batch


@pytest.fixture(scope="module")
def both_paths(qwen3_tokenizer, tmp_path_factory):
    """A GRPOTrainer given make_rollout_func, and build_trainer, with the same GRPOConfig sampling settings."""
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("direct")), per_device_train_batch_size=4, num_generations=2,
        max_completion_length=24, max_steps=1, temperature=0.8, report_to="none", save_strategy="no",
        use_cpu=True, seed=0, disable_tqdm=True, **SAMPLING,
    )  # fmt: skip
    direct = GRPOTrainer(
        model=build_tiny_qwen3_model(qwen3_tokenizer),
        processing_class=qwen3_tokenizer,
        reward_funcs=env_reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        rollout_func=make_rollout_func(GuessNumberEnv, ChatTemplateProcessor(qwen3_tokenizer), **ROLLOUT),
    )
    settings = TrainSettings(
        steps=1, num_generations=2, prompts_per_step=2, lora_r=0, temperature=0.8, extra_args=SAMPLING,
        output_dir=str(tmp_path_factory.mktemp("recipe")), rollout=RolloutConfig(**ROLLOUT, max_completion_tokens=24),
    )  # fmt: skip
    recipe = build_trainer(GuessNumberEnv, build_tiny_qwen3_model(qwen3_tokenizer), qwen3_tokenizer, ["3"], settings)
    return first_rollout(direct), first_rollout(recipe)


def test_build_trainer_and_make_rollout_func_sample_with_identical_settings(both_paths):
    (direct, direct_batch), (recipe, recipe_batch) = both_paths
    assert settings_of(recipe) == settings_of(direct)
    assert settings_of(direct) == {
        "class": "EpisodeCacheGenerator",
        "temperature": 0.8,
        "top_p": 0.9,
        "top_k": 30,
        "min_p": None,
        "repetition_penalty": 1.0,
        "stop_token_ids": [151645],
    }
    # one real short rollout each, same seed: the same tokens
    assert recipe_batch["completion_ids"] == direct_batch["completion_ids"]
    assert recipe_batch["logprobs"] == direct_batch["logprobs"]


def test_a_generator_given_to_make_rollout_func_is_the_one_used(qwen3_tokenizer, tmp_path):
    """An EpisodeCacheGenerator with an empty cache has len 0: it must not be taken for "no generator"."""
    model = build_tiny_qwen3_model(qwen3_tokenizer)
    mine = EpisodeCacheGenerator(model, qwen3_tokenizer, temperature=0.5, stop_token_ids=[151645])
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=2, max_completion_length=24,
        report_to="none", use_cpu=True, bf16=False, disable_tqdm=True,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=qwen3_tokenizer,
        reward_funcs=env_reward,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
        rollout_func=make_rollout_func(GuessNumberEnv, generator=mine, **ROLLOUT),
    )
    assert len(mine) == 0
    assert first_rollout(trainer)[0] is mine


def test_every_sampling_setting_of_grpo_config_is_read(tmp_path):
    cpu = {"output_dir": str(tmp_path), "use_cpu": True, "bf16": False}
    args = GRPOConfig(**cpu, temperature=0.6, top_p=0.8, top_k=12, min_p=0.05, repetition_penalty=1.2)
    assert SamplingSettings.of(args) == SamplingSettings(0.6, 0.8, 12, 0.05, 1.2)
    assert SamplingSettings.of(GRPOConfig(**cpu)).top_k is None  # GRPOConfig's 0: no top-k


def test_min_p_is_applied_when_sampling(qwen3_tokenizer, tiny_qwen3):
    """Every token sampled with min_p has at least min_p times the most likely token's probability."""
    min_p, context = 0.5, qwen3_tokenizer.encode("Guess a number between 1 and 16.")
    generator = TransformersGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, min_p=min_p)
    torch.manual_seed(0)
    sampled = generator.generate([context], max_new_tokens=6)[0].ids
    with torch.no_grad():
        logits = tiny_qwen3(torch.tensor([context + sampled])).logits[0, len(context) - 1 : -1].float()
    probs = torch.softmax(logits, dim=-1)
    chosen = probs.gather(1, torch.tensor(sampled).unsqueeze(1)).squeeze(1)
    assert bool((chosen >= min_p * probs.max(dim=-1).values - 1e-6).all()), (chosen, probs.max(dim=-1).values)
