"""smolagents' ToolCallingAgent on OpenAIServerModel, pointed at the episode's endpoint, unchanged.

smolagents sends its own system prompt (the episode's), ``stop`` sequences (accepted, counted when sampled) and
``tool_choice="required"``. It keeps its memory as text: the next request shows the model's tool call as an
assistant message ``"Calling tools:\\n[...]"`` and the result as a user ``"Observation:"`` message, which is not the
conversation the model was trained on, so a second turn fails the episode under ``on_history_rewrite="fail"``
with the first differing message; an episode that answers at its first turn trains, and under ``"split"`` every
turn trains on the memory as smolagents sent it.
"""

from __future__ import annotations

import torch

from tests.agent_programs.conftest import FINAL_ANSWER, MULTIPLY
from trl_env import ChatTemplateProcessor, rollout
from trl_env.agents import agent_env

SMOLAGENT = "tests.agent_programs.smolagents_programs:calculator"


def run(generator, tokenizer, factory=None, **settings):
    settings = {"max_turns": 3, "max_turn_tokens": 40, "env_isolation": "process", **settings}
    with torch.no_grad():
        (episode,) = rollout(
            factory or agent_env(SMOLAGENT), ["What is 6 * 7?"], generator, ChatTemplateProcessor(tokenizer), **settings
        )
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


def test_smolagents_under_split_trains_every_turn_on_the_memory_it_sent(qwen3_tokenizer, scripted_generator):
    # history="template" + split: each request that re-renders smolagents' memory starts a new sample from it
    factory = agent_env(SMOLAGENT, on_history_rewrite="split")
    episode = run(scripted_generator(MULTIPLY)[1], qwen3_tokenizer, factory, history="template", max_turns=5)
    episode.check(qwen3_tokenizer)
    # 3 tool-calling steps (max_steps=3), then smolagents' own final-answer request, without tools
    assert (episode.error, episode.stop_reason, episode.num_turns, episode.reward) == (None, "done", 4, 0.0)
    assert episode.metrics["agent_history_rewrites"] == 3.0
    turn_ids = qwen3_tokenizer.encode(MULTIPLY) + [qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert [s.completion_ids for s in episode.turn_samples] == [turn_ids] * 4  # the sampled ids, verbatim
    prompts = [qwen3_tokenizer.decode(s.prompt_ids) for s in episode.turn_samples]
    # each later prompt is smolagents' memory as it sent it: the tool call as text, the result as an observation
    assert all("<tools>" in p for p in prompts[:3]) and "<tools>" not in prompts[3]
    assert [p.count("Observation:\n42") for p in prompts] == [0, 1, 2, 3]
    assert prompts[1].endswith(
        "Calling tools:\n[{'id': 'call_0_0', 'type': 'function', 'function': {'name': 'multiply', 'arguments': "
        "{'a': 6, 'b': 7}}}]<|im_end|>\n<|im_start|>user\nObservation:\n42<|im_end|>\n<|im_start|>assistant\n"
    )
    rewrites = episode.transcript()["history_rewrites"]
    assert [r["turn"] for r in rewrites] == [1, 2, 3]
    assert "message 2 differs" in rewrites[0]["reason"] and "tools" not in rewrites[0]
    assert rewrites[2]["reason"].startswith("the agent's request changed its tools") and rewrites[2]["tools"] == []
