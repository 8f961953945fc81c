"""The OpenAI Agents SDK: an ``Agent`` with a ``function_tool`` on ``OpenAIChatCompletionsModel``, run by
``Runner.run_sync`` against the episode's endpoint, trained unchanged through ``agent_env``.

The SDK resends the conversation as the model answered it (the assistant's tool calls, then ``tool`` messages),
so every request extends the previous one. Its own ``max_turns`` ends the run with ``MaxTurnsExceeded`` after the
third model turn's tool has run: that tool result is never sent, so the episode has two tool chunks.
"""

from __future__ import annotations

import torch

from tests.agent_programs.conftest import MULTIPLY
from trl_env import ChatTemplateProcessor, rollout
from trl_env.agents import agent_env
from trl_env.episode import SegmentKind

AGENT = "tests.agent_programs.openai_agents_programs:calculator"
TASK = "What is 6 * 7?"
TOOL_CHUNK = "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def run(generator, tokenizer, **settings):
    settings = {"max_turns": 5, "max_turn_tokens": 40, "env_isolation": "process", **settings}
    with torch.no_grad():
        (episode,) = rollout(agent_env(AGENT), [TASK], generator, ChatTemplateProcessor(tokenizer), **settings)
    return episode


def test_an_agents_sdk_agent_trains_on_its_sampled_tokens_with_tool_results_masked(qwen3_tokenizer, scripted_generator):
    from tests.agent_programs.openai_agents_programs import CALLS, MODEL_TURNS

    CALLS.clear()
    episode = run(scripted_generator(MULTIPLY)[1], qwen3_tokenizer, env_isolation="thread")  # the tool runs here
    episode.check(qwen3_tokenizer)  # masks, logprobs, spans, env chunks decode to their text
    assert episode.error is None and episode.stop_reason == "done" and episode.num_turns == MODEL_TURNS
    assert CALLS == [(6, 7)] * MODEL_TURNS and episode.reward == 0.0  # it never answered without a tool call
    assert episode.metrics["max_turns_exceeded"] == 1.0 and episode.metrics["agent_requests"] == MODEL_TURNS
    trained = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
    assert trained == episode.sampled_ids
    assert qwen3_tokenizer.decode(trained) == (MULTIPLY + "<|im_end|>") * MODEL_TURNS
    assert [s.text for s in episode.segments if s.kind == SegmentKind.TOOL] == [TOOL_CHUNK] * (MODEL_TURNS - 1)
    # the prompt: the agent's instructions as the system message, its tool as the SDK declares it, the task
    assert episode.prompt_text.startswith(
        "<|im_start|>system\nUse the multiply tool, then answer with the number.\n\n# Tools"
    )
    assert '"name": "multiply"' in episode.prompt_text
    assert episode.prompt_text.endswith(f"<|im_start|>user\n{TASK}<|im_end|>\n<|im_start|>assistant\n")


def test_an_agents_sdk_final_answer_is_the_reward(qwen3_tokenizer, scripted_generator):
    episode = run(scripted_generator("The answer is 42.")[1], qwen3_tokenizer)  # in a worker process
    assert (episode.error, episode.reward, episode.num_turns) == (None, 1.0, 1)
    assert episode.metrics["max_turns_exceeded"] == 0.0
    trained = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
    assert qwen3_tokenizer.decode(trained) == "The answer is 42.<|im_end|>"
