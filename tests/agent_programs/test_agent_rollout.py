"""Agent programs on the real openai SDK, trained through agent_env: the episode is the agent's conversation.

The tiny Qwen3 model is scripted to write one tool call per turn (:mod:`trl_env.testing.scripted_model`); the
agents run unchanged in the env pool's worker processes and reach it through their episode's endpoint.
"""

from __future__ import annotations

import threading
import time

import torch

from examples.agent_calculator import TOOLS
from tests.agent_programs.conftest import ANSWER, MULTIPLY
from trl_env import ChatTemplateProcessor, rollout
from trl_env.agents import agent_env
from trl_env.episode import SegmentKind

CALCULATOR = "examples.agent_calculator:solve"


def run(generator, tokenizer, factory, seeds, **settings):
    settings = {"max_turns": 6, "max_turn_tokens": 40, "env_isolation": "process", **settings}
    with torch.no_grad():
        return rollout(factory, seeds, generator, ChatTemplateProcessor(tokenizer), **settings)


def test_an_openai_agent_trains_on_its_sampled_tokens_with_tool_results_masked(qwen3_tokenizer, scripted_generator):
    _, generator = scripted_generator(MULTIPLY)
    episodes = run(generator, qwen3_tokenizer, agent_env(CALCULATOR), ["What is 6 * 7 + 1?"] * 2)
    for episode in episodes:
        episode.check(qwen3_tokenizer)  # masks, logprobs, spans
        # solve() calls the model 4 times (its max_steps), never answers, and returns 0.0: the episode is over
        assert episode.error is None and episode.num_turns == 4 and episode.reward == 0.0
        assert episode.stop_reason == "done"
        trained = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
        assert trained == episode.sampled_ids
        assert qwen3_tokenizer.decode(trained) == (MULTIPLY + "<|im_end|>") * 4
        tool_texts = [s.text for s in episode.segments if s.kind == SegmentKind.TOOL]
        assert (
            tool_texts
            == ["\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"] * 3
        )
        assert [s.kind for s in episode.segments].count(SegmentKind.MODEL) == 4
        assert episode.metrics == {
            "agent_requests": 4.0,
            "agent_refused_requests": 0.0,
            "agent_stop_sequences_sampled": 0.0,
        }
        # the prompt is the agent's first request as the chat template renders it, with the request's tools
        expected = qwen3_tokenizer.apply_chat_template(
            [{"role": "user", "content": "What is 6 * 7 + 1? Use the tools, then call answer()."}],
            tools=TOOLS, tokenize=False, add_generation_prompt=True,
        )  # fmt: skip
        assert episode.prompt_text == expected


def test_the_agents_reward_ends_the_episode(qwen3_tokenizer, scripted_generator):
    _, generator = scripted_generator(ANSWER)
    right, wrong = run(generator, qwen3_tokenizer, agent_env(CALCULATOR), ["What is 6 * 7 + 1?", "What is 2 * 2 + 1?"])
    assert (right.reward, right.num_turns, right.error) == (1.0, 1, None)
    assert (wrong.reward, wrong.num_turns, wrong.error) == (0.0, 1, None)


def test_the_agents_system_message_and_conversation_are_the_episodes(qwen3_tokenizer, scripted_generator):
    from tests.agent_programs.programs import RECORDED

    _, generator = scripted_generator(MULTIPLY)
    (episode,) = run(
        generator, qwen3_tokenizer, agent_env("tests.agent_programs.programs:recording"), ["What is 6 * 7?"],
        env_isolation="thread",  # the agent records its conversation in this process
    )  # fmt: skip
    assert episode.error is None and episode.reward == 0.25 and episode.num_turns == 3
    conversation = RECORDED["What is 6 * 7?"]
    expected_prompt = qwen3_tokenizer.apply_chat_template(
        conversation[:2], tools=TOOLS, tokenize=False, add_generation_prompt=True
    )
    assert episode.prompt_text == expected_prompt  # the system message is the episode's system prompt
    # the agent got each sampled answer decoded, as OpenAI tool calls
    answers = [m for m in conversation if m["role"] == "assistant"]
    assert [call["function"] for a in answers for call in a["tool_calls"]] == [
        {"name": "multiply", "arguments": '{"a": 6, "b": 7}'}
    ] * 3
    assert [m["content"] for m in conversation if m["role"] == "tool"] == ["42", "42"]

    # nothing outlives the episode: the agent, its server and the server's connection threads have ended
    def left() -> list[str]:
        return [t.name for t in threading.enumerate() if "trl-env-agent" in t.name or "process_request" in t.name]

    deadline = time.monotonic() + 5
    while left() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left()
