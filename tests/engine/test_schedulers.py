"""The per-episode schedule against the turn-synchronous one: same episodes, no waiting on stragglers."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from tests.envs.basic import STEP_LOG, Latency
from trl_env import ChatTemplateProcessor, EpisodeCacheGenerator, RolloutConfig, RolloutEngine, rollout
from trl_env.core import ConcurrentGenerator
from trl_env.testing import ContextHashGenerator

IM_END = 151645


def _play(tokenizer, generator, factory, seeds, **settings):
    config = RolloutConfig(max_turns=8, max_turn_tokens=6, max_completion_tokens=300, **settings)
    engine = RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, config)
    try:
        return engine.run(factory, seeds), engine.stats
    finally:
        engine.close()


def _fingerprint(episode):
    return (
        episode.seed,
        episode.completion_ids,
        episode.env_mask,
        episode.logprobs,
        episode.stop_reason,
        episode.reward,
        [(t.action, t.reward, t.span) for t in episode.turns],
    )


class ThreadedGenerator(ContextHashGenerator):
    """A ContextHashGenerator that also takes requests without blocking, like a server."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pool = ThreadPoolExecutor(8)

    def submit(self, contexts, max_new_tokens):
        return self.pool.submit(self.generate, contexts, max_new_tokens)


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_an_episode_does_not_depend_on_the_schedule_or_its_batch_mates(qwen3_tokenizer, isolation):
    seeds = [f"s{i}" for i in range(12)]
    factory = functools.partial(Latency, mix=((0.0, 0.6), (0.02, 0.3), (0.2, 0.1)))
    runs = {}
    for name, settings in {
        "turn": {"schedule": "turn"},
        "episode": {"schedule": "episode"},
        "episode, 3 per call": {"schedule": "episode", "max_batch": 3},
        "episode, no gathering": {"schedule": "episode", "gather_window": 0.0},
    }.items():
        generator = ContextHashGenerator(range(100, 5000), stop_id=IM_END, stop_prob=0.3)
        episodes, stats = _play(qwen3_tokenizer, generator, factory, seeds, env_isolation=isolation, **settings)
        runs[name] = [_fingerprint(e) for e in episodes]
        assert sum(generator.calls) == sum(e.num_turns for e in episodes)
        if "3 per call" in name:
            assert max(generator.calls) <= 3
    assert len({len(fp[1]) for fp in runs["turn"]}) > 1  # episode lengths vary: batches really differ
    for name, run in runs.items():
        assert run == runs["turn"], f"{name} differs from the turn-synchronous schedule"


def test_a_fast_episode_is_not_held_up_by_a_slow_one(qwen3_tokenizer):
    factory = functools.partial(Latency, slow_s=1.0, turns=3)
    seeds = ["slow-a", "fast-b"]
    generator = ContextHashGenerator(range(100, 5000), stop_id=IM_END, stop_prob=0.5)
    _play(qwen3_tokenizer, generator, factory, seeds, schedule="episode", env_isolation="thread")
    slow_first_step_end = STEP_LOG["slow-a"][0][1]
    assert len(STEP_LOG["fast-b"]) == 3
    assert STEP_LOG["fast-b"][-1][0] < slow_first_step_end  # all three fast turns ran during one slow step
    generator = ContextHashGenerator(range(100, 5000), stop_id=IM_END, stop_prob=0.5)
    _play(qwen3_tokenizer, generator, factory, seeds, schedule="turn", env_isolation="thread")
    assert STEP_LOG["fast-b"][1][0] > STEP_LOG["slow-a"][0][1]  # turn-synchronous: turn 2 waited for the slow env


def test_a_concurrent_generator_gets_one_request_per_ready_context(qwen3_tokenizer):
    seeds = [f"s{i}" for i in range(8)]
    generator = ThreadedGenerator(range(100, 5000), stop_id=IM_END, stop_prob=0.3)
    assert isinstance(generator, ConcurrentGenerator)
    episodes, stats = _play(qwen3_tokenizer, generator, Latency, seeds, env_isolation="thread")
    assert set(generator.calls) == {1} and stats.generate_calls == sum(e.num_turns for e in episodes)
    reference = ContextHashGenerator(range(100, 5000), stop_id=IM_END, stop_prob=0.3)
    expected, _ = _play(qwen3_tokenizer, reference, Latency, seeds, env_isolation="thread", schedule="turn")
    assert [_fingerprint(e) for e in episodes] == [_fingerprint(e) for e in expected]
    assert 0 < stats.utilisation <= 1


def test_the_episode_cache_still_reuses_each_episode_across_turns(qwen3_tokenizer, tiny_qwen3):
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[IM_END])
    torch.manual_seed(0)
    factory = functools.partial(Latency, mix=((0.0, 0.5), (0.05, 0.5)))
    episodes = rollout(
        factory,
        [f"c{i}" for i in range(6)],
        generator,
        ChatTemplateProcessor(qwen3_tokenizer),
        tokenizer=qwen3_tokenizer,
        max_turns=4,
        max_turn_tokens=5,
        env_isolation="thread",
        schedule="episode",
        gather_window=0.0,  # many small calls: episodes miss calls while their env sleeps
    )
    assert any(e.num_turns > 2 for e in episodes)
    assert generator.stats.reuse_rate > 0.5  # later turns fed only their new tokens
    assert len(generator) == 0  # every ended episode's keys and values were dropped


def test_rollout_stats_count_the_generator_busy_time_once(qwen3_tokenizer):
    _, stats = _play(
        qwen3_tokenizer,
        ContextHashGenerator(range(100, 5000), stop_id=IM_END),
        Latency,
        ["a", "b", "c"],
        env_isolation="thread",
    )
    assert stats.schedule == "episode" and stats.wall_s > 0 and 0 < stats.utilisation < 1
