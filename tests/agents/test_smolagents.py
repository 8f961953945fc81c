"""smolagents' ToolCallingAgent on OpenAIServerModel, pointed at the episode's endpoint, unchanged.

smolagents sends its own system prompt (the episode's), ``stop`` sequences (accepted, counted when sampled) and
``tool_choice="required"``. It keeps its memory as text: the next request shows the model's tool call as an
assistant message ``"Calling tools:\\n[...]"`` and the result as a user ``"Observation:"`` message, which is not the
conversation the model was trained on, so a second turn fails the episode under ``on_history_rewrite="fail"``
with the first differing message; an episode that answers at its first turn trains.
"""

from __future__ import annotations

import torch

from tests.agents.conftest import FINAL_ANSWER, MULTIPLY
from trl_env import ChatTemplateProcessor, rollout
from trl_env.agents import agent_env

SMOLAGENT = "tests.agents.smolagents_programs:calculator"


def run(generator, tokenizer):
    with torch.no_grad():
        (episode,) = rollout(
            agent_env(SMOLAGENT), ["What is 6 * 7?"], generator, ChatTemplateProcessor(tokenizer), max_turns=3,
            max_turn_tokens=40, env_isolation="process",
        )  # fmt: skip
    return episode


def test_a_smolagents_tool_calling_agent_trains_on_its_answer(qwen3_tokenizer, scripted_generator):
    episode = run(scripted_generator(FINAL_ANSWER)[1], qwen3_tokenizer)
    episode.check(qwen3_tokenizer)
    assert (episode.error, episode.reward, episode.num_turns) == (None, 1.0, 1)
    assert episode.prompt_text.startswith("<|im_start|>system\nYou are an expert assistant")  # smolagents' own
    assert "<tool_call>" in episode.prompt_text and "New task:\nWhat is 6 * 7?" in episode.prompt_text
    trained = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
    assert qwen3_tokenizer.decode(trained) == FINAL_ANSWER + "<|im_end|>"


def test_smolagents_rewritten_memory_fails_the_episode_with_the_first_differing_message(
    qwen3_tokenizer, scripted_generator
):
    episode = run(scripted_generator(MULTIPLY)[1], qwen3_tokenizer)
    assert episode.stop_reason == "env_error" and episode.num_turns == 1
    assert "HistoryError: the agent's request does not extend its conversation: message 2 differs" in episode.error
    assert '"content": "Calling tools:' in episode.error  # what smolagents sent instead of the tool call
