"""GRPOTrainer end to end with make_rollout_func on a tiny Qwen3 model."""

import copy
import time

import pytest
from grpo_helpers import ThreeTurnEnv, make_trainer

from tests.envs.basic import SometimesBroken  # noqa: F401
from trl_env import ChatChunks, ChunkedProcessor, NonAdditiveProcessorError, make_rollout_func
from trl_env.testing import build_tiny_qwen3_model


def test_grpo_trains_on_a_three_turn_env_and_the_reward_reaches_reward_functions(qwen3_tokenizer, tmp_path):
    seen: dict[str, list] = {"env_reward": [], "num_turns": [], "transcript": []}

    def spy(completions, env_reward=None, num_turns=None, transcript=None, **kwargs):
        seen["env_reward"] += env_reward
        seen["num_turns"] += num_turns
        seen["transcript"] += transcript
        return [0.0] * len(completions)

    from trl_env import env_reward

    model = build_tiny_qwen3_model(qwen3_tokenizer, seed=1)
    before = copy.deepcopy(model.state_dict())
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=6, system_prompt="Be brief.")
    trainer = make_trainer(
        model,
        qwen3_tokenizer,
        rollout_func,
        tmp_path,
        reward_funcs=[env_reward, spy],
        steps=2,
        max_completion_length=96,
    )
    start = time.perf_counter()
    trainer.train()
    seconds_per_step = (time.perf_counter() - start) / 2
    print(f"GRPO step time (tiny Qwen3, 4 episodes x 3 turns): {seconds_per_step:.2f} s")

    assert seen["num_turns"] == [3] * 8
    assert all(r >= 0 for r in seen["env_reward"])
    assert all("Turn 2 done." in t for t in seen["transcript"])
    logged = [h for h in trainer.state.log_history if "rewards/env_reward/mean" in h]
    assert len(logged) == 2
    for entry, start_index in zip(logged, (0, 4), strict=True):
        assert entry["rewards/env_reward/mean"] == pytest.approx(
            sum(seen["env_reward"][start_index : start_index + 4]) / 4
        )
        assert entry["env/turns_mean"] == 3
        assert entry["completions/clipped_ratio"] == 0  # finished episodes end with <|im_end|>
    changed = [k for k, v in model.state_dict().items() if not (v == before[k]).all()]
    assert changed, "training changed no parameter"


def _non_additive_processor():
    # a generation prompt that ends in plain text ("Assistant:"): a "\n"-led answer merges with it
    chunks = ChatChunks(
        bare_prefix="",
        system_prefix="<|im_start|>system\n",
        system_suffix="<|im_end|>\n",
        user_prefix="<|im_start|>user\n",
        user_suffix="<|im_end|>\nAssistant:",
        turn_end="<|im_end|>",
        after_turn_end="\n",
    )
    return ChunkedProcessor(chunks, name="plain-prompt")


def test_training_refuses_a_non_additive_processor(qwen3_tokenizer, tiny_qwen3, tmp_path):
    rollout_func = make_rollout_func(ThreeTurnEnv, _non_additive_processor(), max_turns=2, max_turn_tokens=4)
    trainer = make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1)
    with pytest.raises(NonAdditiveProcessorError, match="allow_non_additive"):
        trainer.train()


def test_explicit_override_trains_with_a_non_additive_processor(qwen3_tokenizer, tiny_qwen3, tmp_path):
    rollout_func = make_rollout_func(
        ThreeTurnEnv, _non_additive_processor(), max_turns=2, max_turn_tokens=4, allow_non_additive=True
    )
    trainer = make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1)
    trainer.train()
    assert trainer.state.global_step == 1


def test_env_faults_are_counted_and_the_run_continues(qwen3_tokenizer, tiny_qwen3, tmp_path):
    # threads: SometimesBroken counts its instances in one process to break every other one
    rollout_func = make_rollout_func(
        SometimesBroken, max_turns=3, max_turn_tokens=4, failure_reward=-1.0, env_isolation="thread"
    )
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=2, max_completion_length=96
    )
    trainer.train()
    logged = [h for h in trainer.state.log_history if "env/errors" in h]
    assert trainer.state.global_step == 2
    assert [h["env/errors"] for h in logged] == [2, 2]
    assert all(h["rewards/env_reward/mean"] < 1.5 for h in logged)
