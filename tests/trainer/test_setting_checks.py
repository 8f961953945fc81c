"""One budget, one source; each invalid combination one check, one severity, on both training paths."""

from __future__ import annotations

import copy
import dataclasses
import functools

import pytest
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from tests.envs.basic import Counting
from trl_env import ChatTemplateProcessor, env_reward, make_rollout_func
from trl_env.engine.config import RolloutConfig
from trl_env.engine.tree import TreeShape
from trl_env.errors import ConfigError
from trl_env.trainer.recipe import DEFAULT_COMPLETION_TOKENS, TrainSettings, build_trainer
from trl_env.trainer.setting_checks import check_tree_credit, episode_budget
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer

LIMIT = 24  # the trainers' max_completion_length: well under what 10 turns of 8 tokens need
SEEDS = ["s"] * 4  # one group of num_generations=4, as TRL passes them
LONG = {"max_turns": 10, "max_turn_tokens": 8, "env_isolation": "thread"}
LONG_ENV = functools.partial(Counting, turns=10)  # more turns than the budget allows


def _trainer(trainer_class, model, tokenizer, tmp_path, **extra):
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=LIMIT,
        max_steps=1, beta=0.0, report_to="none", use_cpu=True, save_strategy="no", seed=0,
    )  # fmt: skip
    return trainer_class(
        model=copy.deepcopy(model),
        processing_class=tokenizer,
        reward_funcs=[env_reward],
        args=args,
        train_dataset=Dataset.from_dict({"prompt": SEEDS}),
        **extra,
    )


@pytest.fixture(scope="module")
def grpo(tiny_qwen3, qwen3_tokenizer, tmp_path_factory):
    return _trainer(GRPOTrainer, tiny_qwen3, qwen3_tokenizer, tmp_path_factory.mktemp("grpo"))


@pytest.fixture(scope="module")
def tree_credit(tiny_qwen3, qwen3_tokenizer, tmp_path_factory):
    path = tmp_path_factory.mktemp("tree")
    return _trainer(TurnLevelGRPOTrainer, tiny_qwen3, qwen3_tokenizer, path, advantage_mode="tree")


def test_the_trainers_max_completion_length_is_the_episode_budget(grpo, qwen3_tokenizer, monkeypatch):
    built = []
    from_kwargs = RolloutConfig.from_kwargs.__func__

    def counted(cls, *args, **kwargs):
        built.append(kwargs)
        return from_kwargs(cls, *args, **kwargs)

    monkeypatch.setattr(RolloutConfig, "from_kwargs", classmethod(counted))
    rollout_func = make_rollout_func(LONG_ENV, ChatTemplateProcessor(qwen3_tokenizer), **LONG)
    batch = rollout_func(SEEDS, grpo)
    lengths = [len(ids) for ids in batch["completion_ids"]]
    assert max(lengths) <= LIMIT and max(lengths) >= LIMIT - LONG["max_turn_tokens"]  # the budget bit
    assert len(built) == 1  # the settings are parsed once; the trainer's budget is filled in, not re-parsed


def test_a_smaller_rollout_budget_is_kept_and_a_larger_one_refused(grpo, qwen3_tokenizer):
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    smaller = make_rollout_func(LONG_ENV, processor, max_completion_tokens=12, **LONG)
    assert max(len(ids) for ids in smaller(SEEDS, grpo)["completion_ids"]) <= 12
    larger = make_rollout_func(LONG_ENV, processor, max_completion_tokens=LIMIT + 1, **LONG)
    with pytest.raises(ConfigError, match=f"max_completion_tokens={LIMIT + 1} exceeds the trainer's max_completion"):
        larger(SEEDS, grpo)


def test_episode_budget_fills_in_only_a_missing_budget():
    config = RolloutConfig(max_turns=3)
    assert episode_budget(config, 96) == dataclasses.replace(config, max_completion_tokens=96)
    assert episode_budget(RolloutConfig(max_completion_tokens=96), 96).max_completion_tokens == 96
    with pytest.raises(ConfigError, match="max_completion_tokens=97 exceeds the trainer's max_completion_length=96"):
        episode_budget(RolloutConfig(max_completion_tokens=97), 96)


def test_build_trainer_takes_its_budget_from_the_rollout_config(tiny_qwen3, qwen3_tokenizer, tmp_path):
    assert "max_completion_tokens" not in {f.name for f in dataclasses.fields(TrainSettings)}  # no second source
    for budget, expected in ((40, 40), (None, DEFAULT_COMPLETION_TOKENS)):
        settings = TrainSettings(
            steps=1, num_generations=4, prompts_per_step=1, lora_r=0, output_dir=str(tmp_path),
            rollout=RolloutConfig(max_turns=2, max_turn_tokens=4, max_completion_tokens=budget),
        )  # fmt: skip
        trainer = build_trainer(Counting, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, ["s"], settings)
        assert trainer.args.max_completion_length == expected


@pytest.mark.parametrize(
    ("tree", "advantage"), [(TreeShape((1,), 2), "episode"), (TreeShape((1,), 2), "turn"), (None, "tree")]
)
def test_tree_rollouts_and_tree_credit_go_together(tree, advantage):
    with pytest.raises(ConfigError, match=r"tree rollouts and advantage='tree' go together: .*set both .* or neither"):
        check_tree_credit(tree, advantage, num_generations=4)


def test_matching_tree_settings_pass_and_a_group_the_tree_does_not_divide_is_refused():
    check_tree_credit(None, "episode", num_generations=3)
    check_tree_credit(TreeShape((1,), 2), "tree", num_generations=4)
    with pytest.raises(ConfigError, match="num_generations=3 is not a multiple of the 2 leaves per root"):
        check_tree_credit(TreeShape((1,), 2), "tree", num_generations=3)


def test_make_rollout_func_refuses_tree_rollouts_under_a_trainer_without_tree_credit(grpo, qwen3_tokenizer):
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    rollout_func = make_rollout_func(Counting, processor, tree=TreeShape((1,), 2), **LONG)
    with pytest.raises(ConfigError, match=r"go together: .*\(got tree=TreeShape\(.*advantage='episode'\)"):
        rollout_func(SEEDS, grpo)  # an error before any episode, as build_trainer's


def test_make_rollout_func_refuses_the_tree_advantage_without_tree_rollouts(tree_credit, qwen3_tokenizer):
    rollout_func = make_rollout_func(Counting, ChatTemplateProcessor(qwen3_tokenizer), **LONG)
    with pytest.raises(ConfigError, match=r"go together: .*\(got tree=None, advantage='tree'\)"):
        rollout_func(SEEDS, tree_credit)


def test_build_trainer_refuses_the_same_combinations_with_the_same_check(tiny_qwen3, qwen3_tokenizer, tmp_path):
    settings = TrainSettings(steps=1, num_generations=4, prompts_per_step=1, lora_r=0, output_dir=str(tmp_path),
                             advantage="tree", rollout=RolloutConfig(max_turns=2))  # fmt: skip
    with pytest.raises(ConfigError, match=r"go together: .*\(got tree=None, advantage='tree'\)"):
        build_trainer(Counting, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, ["s"], settings)
