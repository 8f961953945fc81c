"""LangGraph: a ``StateGraph`` with a model node (``langchain_openai.ChatOpenAI`` on the episode's endpoint, a tool
bound) and a prebuilt ``ToolNode``, trained unchanged through ``agent_env``.

LangChain sends the conversation as the model answered it (the assistant's tool calls, then ``tool`` messages),
so every request extends the previous one: the episode is the graph's conversation token for token. LangSmith
tracing is off in the program (nothing reaches the network).
"""

from __future__ import annotations

import torch

from tests.agent_programs.conftest import MULTIPLY
from trl_env import ChatTemplateProcessor, rollout
from trl_env.agents import agent_env
from trl_env.episode import SegmentKind

GRAPH = "tests.agent_programs.langgraph_programs:calculator"
TASK = "What is 6 * 7?"
TOOL_CHUNK = "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n"


def run(generator, tokenizer, **settings):
    settings = {"max_turns": 4, "max_turn_tokens": 40, "env_isolation": "process", **settings}
    with torch.no_grad():
        (episode,) = rollout(agent_env(GRAPH), [TASK], generator, ChatTemplateProcessor(tokenizer), **settings)
    return episode


def test_a_langgraph_agent_trains_on_its_sampled_tokens_with_tool_results_masked(qwen3_tokenizer, scripted_generator):
    from tests.agent_programs.langgraph_programs import CALLS

    CALLS.clear()
    episode = run(scripted_generator(MULTIPLY)[1], qwen3_tokenizer, env_isolation="thread")  # the tool runs here
    episode.check(qwen3_tokenizer)  # masks, logprobs, spans, env chunks decode to their text
    # the graph calls the model 3 times, the tool after the first two; the third call is not followed
    assert episode.error is None and episode.stop_reason == "done" and episode.num_turns == 3
    assert CALLS == [(6, 7)] * 2 and episode.reward == 0.0  # its last answer is a tool call, not 42
    assert episode.metrics["tool_calls"] == 2.0 and episode.metrics["agent_requests"] == 3.0
    trained = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
    assert trained == episode.sampled_ids
    assert qwen3_tokenizer.decode(trained) == (MULTIPLY + "<|im_end|>") * 3
    assert [s.text for s in episode.segments if s.kind == SegmentKind.TOOL] == [TOOL_CHUNK] * 2
    # the prompt: the graph's system message, its tool as LangChain declares it, the task
    assert episode.prompt_text.startswith(
        "<|im_start|>system\nUse the multiply tool, then answer with the number.\n\n# Tools"
    )
    assert '"name": "multiply"' in episode.prompt_text
    assert episode.prompt_text.endswith(f"<|im_start|>user\n{TASK}<|im_end|>\n<|im_start|>assistant\n")


def test_a_langgraph_final_answer_is_the_reward(qwen3_tokenizer, scripted_generator):
    episode = run(scripted_generator("The answer is 42.")[1], qwen3_tokenizer)
    assert (episode.error, episode.reward, episode.num_turns) == (None, 1.0, 1)
    trained = [t for t, m in zip(episode.completion_ids, episode.env_mask, strict=True) if m]
    assert qwen3_tokenizer.decode(trained) == "The answer is 42.<|im_end|>"
