"""Every fault of an agent program ends only its own episode, loudly, with the reason in the episode's error.

One rollout holds them all next to a healthy episode (:func:`tests.agent_programs.programs.by_task` runs the behaviour
its seed names), in the env pool's worker processes.
"""

from __future__ import annotations

import pytest
import torch

from tests.agent_programs.conftest import ANSWER
from trl_env import ChatTemplateProcessor, rollout
from trl_env.agents import agent_env

SEEDS = ["ok", "keeps_calling", "rewrites", "raises", "never_calls", "hangs", "malformed", "streams"]


@pytest.fixture(scope="module")
def episodes(qwen3_tokenizer, scripted_generator):
    _, generator = scripted_generator(ANSWER)
    factory = agent_env("tests.agent_programs.programs:by_task", max_turns=2)
    with torch.no_grad():
        ended = rollout(
            factory, SEEDS, generator, ChatTemplateProcessor(qwen3_tokenizer), max_turns=6, max_turn_tokens=40,
            env_isolation="process", env_timeout=5,
        )  # fmt: skip
    return dict(zip(SEEDS, ended, strict=True))


def test_the_healthy_episode_next_to_the_faults_is_untouched(episodes, qwen3_tokenizer):
    episode = episodes["ok"]
    episode.check(qwen3_tokenizer)
    assert (episode.error, episode.reward, episode.num_turns) == (None, 1.0, 1)


def test_calls_after_the_turn_budget_get_an_error_response_and_the_agent_still_scores(episodes):
    episode = episodes["keeps_calling"]
    assert episode.error is None and episode.num_turns == 2 and episode.stop_reason == "done"
    assert episode.reward == 0.5  # the agent's own return, after its third request was refused
    assert episode.metrics["agent_refused_requests"] == 1.0 and episode.metrics["answered_turns"] == 2.0


@pytest.mark.parametrize(
    ("seed", "turn", "reason"),
    [
        ("rewrites", 1, "HistoryError: the agent's request does not extend its conversation: message 0 differs"),
        ("raises", 1, "AgentError: the agent raised ValueError: the agent's own bug (at "),
        ("never_calls", 0, "AgentError: the agent returned 1.0 without calling the model"),
        ("hangs", 1, "timeout: step took longer than 5"),
        ("malformed", 0, "the endpoint refused 1 request(s), the last: n: only n=1 is supported"),
        ("streams", 0, "the last: stream: streaming is not supported"),
    ],
)
def test_each_fault_fails_only_its_episode_with_the_reason(episodes, seed, turn, reason):
    episode = episodes[seed]
    assert episode.stop_reason == "env_error" and episode.num_turns == turn
    assert f"(seed={seed!r}, turn={turn})" in episode.error and reason in episode.error, episode.error
