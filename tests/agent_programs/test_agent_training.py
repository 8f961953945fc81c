"""One GRPO step on an openai-SDK agent through make_rollout_func(agent_env(...)), with a real GRPOTrainer."""

from __future__ import annotations

from tests.agent_programs.conftest import ANSWER
from tests.grpo_helpers import make_trainer
from trl_env import make_rollout_func
from trl_env.agents import agent_env


def test_grpo_trains_an_openai_sdk_agent(qwen3_tokenizer, scripted_generator, tmp_path):
    model, _ = scripted_generator(ANSWER)
    rollout_func = make_rollout_func(
        agent_env("examples.agent_calculator:solve", max_turns=2), max_turns=2, max_turn_tokens=32,
        env_isolation="process",
    )  # fmt: skip
    prompts = ["What is 6 * 7 + 1?", "What is 2 * 3 + 4?"] * 16
    trainer = make_trainer(model, qwen3_tokenizer, rollout_func, tmp_path, steps=1, prompts=prompts)
    trainer.train()
    (log,) = [log for log in trainer.state.log_history if "reward" in log]
    # the scripted model answers 43 at once: right for the first question, wrong for the second
    assert log["env/errors"] == 0.0 and log["reward"] in (0.0, 1.0)
    assert log["completions/mean_length"] == len(qwen3_tokenizer.encode(ANSWER)) + 1
