"""Tool envs end to end with the tiny Qwen3 model: process isolation, masks, parse failures, GRPOTrainer.

A random model never calls a tool, so the tiny model is scripted (:mod:`trl_env.testing.scripted_model`):
while sampling it writes one tool call; its forward pass, logprobs and gradients stay its own.
"""

from __future__ import annotations

import pytest
import torch

from tests.grpo_helpers import make_trainer
from tests.tools.envs import OBSERVATION, NativePing, StepGame
from trl_env import ChatTemplateProcessor, make_rollout_func, rollout
from trl_env.adapters.trl_environment import trl_environment
from trl_env.episode import SegmentKind
from trl_env.generation.transformers_generator import TransformersGenerator
from trl_env.testing import build_tiny_qwen3_model
from trl_env.testing.scripted_model import script_model

CALL = '<tool_call>{"name":"step","arguments":{}}</tool_call>'


def scripted(tokenizer, text: str):
    model = script_model(build_tiny_qwen3_model(tokenizer), tokenizer, text)
    return model, TransformersGenerator(
        model, tokenizer, stop_token_ids=[tokenizer.convert_tokens_to_ids("<|im_end|>")]
    )


def test_tool_episode_in_worker_processes(qwen3_tokenizer):
    _, generator = scripted(qwen3_tokenizer, CALL)
    factory = trl_environment(StepGame, max_tool_calling_iterations=2)
    with torch.no_grad():
        episodes = rollout(
            factory, ["", ""], generator, ChatTemplateProcessor(qwen3_tokenizer),
            max_turns=3, max_turn_tokens=32, env_isolation="process",
        )  # fmt: skip
    for episode in episodes:
        episode.check(qwen3_tokenizer)  # masks, logprobs, spans
        assert episode.error is None and episode.num_turns == 3 and episode.reward == 2.0
        # the prompt is TRL's: the user message with reset's observation, the tools as the template declares them
        expected = qwen3_tokenizer.apply_chat_template(
            [{"role": "user", "content": OBSERVATION}], tools=[StepGame().step], tokenize=False,
            add_generation_prompt=True,
        )  # fmt: skip
        assert episode.prompt_text == expected
        env_texts = [s.text for s in episode.segments if s.kind == SegmentKind.TOOL]
        assert env_texts == [
            "\n<|im_start|>user\n<tool_response>\nTurn 1: higher.\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
            "\n<|im_start|>user\n<tool_response>\nTurn 2: lower.\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
        ]
        assert all(turn.parsed_ok for turn in episode.turns)
        assert episode.metrics == {"tool_calls": 2.0, "tool_failures": 0.0}


def test_malformed_calls_are_counted_and_answered_with_the_tool_error(qwen3_tokenizer):
    _, generator = scripted(qwen3_tokenizer, '<tool_call>{"name":"step",}</tool_call>')
    with torch.no_grad():
        (episode,) = rollout(
            trl_environment(StepGame), [""], generator, ChatTemplateProcessor(qwen3_tokenizer),
            max_turns=2, max_turn_tokens=32, env_isolation="process",
        )  # fmt: skip
    assert episode.parse_failures == 2
    env_text = next(s.text for s in episode.segments if s.kind == SegmentKind.TOOL)
    assert "<tool_response>\n{'error': 'malformed tool call" in env_text
    assert episode.metrics == {"tool_calls": 2.0, "tool_failures": 2.0}


def test_native_tool_env_answers_results_then_a_user_line(qwen3_tokenizer):
    _, generator = scripted(qwen3_tokenizer, '<tool_call>{"name":"ping","arguments":{}}</tool_call>')
    with torch.no_grad():
        (episode,) = rollout(
            NativePing, ["x"], generator, ChatTemplateProcessor(qwen3_tokenizer), max_turns=2, max_turn_tokens=40,
            env_isolation="process",
        )  # fmt: skip
    episode.check(qwen3_tokenizer)
    env_text = next(s.text for s in episode.segments if s.kind == SegmentKind.TOOL)
    assert env_text == (
        "\n<|im_start|>user\n<tool_response>\npong\n</tool_response><|im_end|>\n"
        "<|im_start|>user\nKeep going.<|im_end|>\n<|im_start|>assistant\n"
    )


def test_grpo_trainer_trains_on_a_trl_environment_class(qwen3_tokenizer, tmp_path):
    model, _ = scripted(qwen3_tokenizer, CALL)
    call_tokens = len(qwen3_tokenizer.encode(CALL)) + 1  # and <|im_end|>
    rollout_func = make_rollout_func(
        trl_environment(StepGame, max_tool_calling_iterations=2), max_turns=3, max_turn_tokens=32,
        env_isolation="process",
    )  # fmt: skip
    trainer = make_trainer(model, qwen3_tokenizer, rollout_func, tmp_path, steps=2, max_completion_length=160)
    trainer.train()
    logs = [log for log in trainer.state.log_history if "reward" in log]
    assert [log["reward"] for log in logs] == [2.0, 2.0]  # two tool turns run (TRL's iteration bound), one not
    assert all(log["env/parse_failure_rate"] == 0.0 for log in logs)
    # TRL counts only the model's tokens (mask 1): three scripted turns; the tool results are masked out
    assert all(log["completions/mean_length"] == 3 * call_tokens for log in logs)


@pytest.mark.parametrize("thinking", [True, False])
def test_qwen3_presets_parse_the_scripted_call(qwen3_tokenizer, thinking):
    from trl_env.chat.presets import preset

    processor = preset("qwen3_thinking" if thinking else "qwen3_nothink")
    assert processor.parse(CALL).action == '<tool_call>{"name": "step", "arguments": {}}</tool_call>'
