"""More episodes (or tree branches) than env workers: the extra ones queue and start when a worker frees.

Each rollout runs in a daemon thread joined with a deadline, so a schedule that waits forever on a queued
episode fails its test instead of hanging the suite. Every run is compared with a reference played with a
worker per episode: with a generator whose output depends only on the context, queueing must not change a
single token, reward or stop reason.
"""

from __future__ import annotations

import functools
import threading

import pytest

from tests.envs.basic import Hangs, Latency, RaisesAtReset, RaisesAtStep2
from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.engine.tree import TreeShape
from trl_env.episode import StopReason
from trl_env.testing import ContextHashGenerator

IM_END = 151645
DEADLINE_S = 60.0  # a run takes well under a second (process isolation: a few seconds for the first workers)
WORKERS = 3
LATENCY = functools.partial(Latency, mix=((0.0, 0.8), (0.01, 0.2)))  # lives 2-8 turns, from the seed


def _play(tokenizer, factory, seeds, **settings):
    """The episodes and stats of one rollout, or a test failure if it has not finished within DEADLINE_S."""
    generator = ContextHashGenerator(range(100, 5000), stop_id=IM_END, stop_prob=0.3)
    config = RolloutConfig(max_turns=8, max_turn_tokens=6, max_completion_tokens=300, **settings)
    engine = RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, config)
    outcome: dict = {}

    def run() -> None:
        try:
            outcome["episodes"] = engine.run(factory, seeds)
        except BaseException as error:  # reported in the test's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    try:
        assert not thread.is_alive(), f"{len(seeds)} episodes on {settings.get('env_workers')} workers hang"
    finally:
        engine.close()  # cancels what a hung run waits for, so its thread ends too
    if "error" in outcome:
        raise outcome["error"]
    return outcome["episodes"], engine.stats


def _fingerprint(episode):
    return (
        episode.seed,
        episode.completion_ids,
        episode.env_mask,
        episode.stop_reason,
        episode.reward,
        episode.error is None,
        episode.tree_nodes,
        [(t.action, t.reward) for t in episode.turns],
    )


_REFERENCES: dict = {}


def _reference(tokenizer, factory, seeds, tree, timeout):
    """The same seeds with one thread worker per episode (nothing queues)."""
    key = (repr(factory), tuple(seeds), tree, timeout)
    if key not in _REFERENCES:
        settings = {"env_workers": len(seeds), "env_isolation": "thread", "env_timeout": timeout}
        episodes, _ = _play(tokenizer, factory, seeds, tree=tree, **settings)
        _REFERENCES[key] = [_fingerprint(e) for e in episodes]
    return _REFERENCES[key]


def _check(tokenizer, factory, seeds, *, tree=None, **settings):
    episodes, stats = _play(tokenizer, factory, seeds, tree=tree, **settings)
    assert [e.seed for e in episodes] == list(seeds)
    assert all(e.stop_reason is not None for e in episodes)
    assert [_fingerprint(e) for e in episodes] == _reference(
        tokenizer, factory, seeds, tree, settings.get("env_timeout", 60.0)
    )
    return episodes, stats


@pytest.mark.parametrize("schedule", ["turn", "episode"])
@pytest.mark.parametrize("isolation", ["thread", "process"])
@pytest.mark.parametrize("count", [WORKERS - 1, WORKERS, 2 * WORKERS + 1])
def test_any_number_of_episodes_runs_on_a_few_workers(qwen3_tokenizer, schedule, isolation, count):
    seeds = [f"s{i}" for i in range(count)]
    episodes, _ = _check(
        qwen3_tokenizer, LATENCY, seeds, schedule=schedule, env_isolation=isolation, env_workers=WORKERS
    )
    assert {e.stop_reason for e in episodes} <= {StopReason.DONE, StopReason.MAX_TURNS, StopReason.TOKEN_BUDGET}
    assert len({e.num_turns for e in episodes}) > 1 or count < WORKERS  # episodes end at different turns


@pytest.mark.parametrize("schedule", ["turn", "episode"])
@pytest.mark.parametrize("isolation", ["thread", "process"])
@pytest.mark.parametrize(
    ("tree", "roots"),
    [
        (TreeShape((1,), 2), 1),  # 2 leaves on 3 workers
        (TreeShape((1,), 2), 4),  # 8 leaves: whole trees queue
        (TreeShape((1,), 4), 2),  # 4 branches of one root on 3 workers: the forks queue too
        (TreeShape((1, 2), 2), 3),  # two levels: forks of forks queue
    ],
)
def test_tree_branches_queue_for_workers_too(qwen3_tokenizer, schedule, isolation, tree, roots):
    seeds = [f"t{root}" for root in range(roots) for _ in range(tree.leaves_per_root)]
    factory = functools.partial(Latency, mix=((0.0, 0.8), (0.01, 0.2)), turns=3)
    episodes, _ = _check(
        qwen3_tokenizer, factory, seeds, tree=tree, schedule=schedule, env_isolation=isolation, env_workers=WORKERS
    )
    assert all(e.num_turns == 3 for e in episodes)


@pytest.mark.parametrize("schedule", ["turn", "episode"])
@pytest.mark.parametrize(
    ("factory", "isolation", "timeout"),
    [(RaisesAtReset, "thread", 60.0), (RaisesAtStep2, "thread", 60.0), (Hangs, "thread", 0.5), (Hangs, "process", 0.5)],
    ids=["reset fails", "step fails", "step times out (thread)", "step times out (process)"],
)
def test_failed_episodes_free_their_worker_for_the_queue(qwen3_tokenizer, schedule, factory, isolation, timeout):
    seeds = ["a", "b", "c", "d", "e", "f", "b", "g"]  # "b" and "d" fail
    settings = {"schedule": schedule, "env_isolation": isolation, "env_workers": 2, "env_timeout": timeout}
    episodes, _ = _check(qwen3_tokenizer, factory, seeds, **settings)
    assert [e.seed for e in episodes if e.failed] == ["b", "d", "b"]
    if factory is Hangs:
        assert all("timeout" in e.error for e in episodes if e.failed)


@pytest.mark.parametrize("schedule", ["turn", "episode"])
@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_reused_envs_serve_the_queue(qwen3_tokenizer, schedule, isolation):
    seeds = [f"r{i}" for i in range(2 * WORKERS + 1)]
    _check(
        qwen3_tokenizer,
        LATENCY,
        seeds,
        schedule=schedule,
        env_isolation=isolation,
        env_workers=WORKERS,
        reuse_envs=True,
    )


@pytest.mark.parametrize("settings", [{"max_batch": 2}, {"gather_window": 0.0}, {"gather_window": 5.0}])
def test_the_episode_schedule_does_not_gather_for_queued_episodes(qwen3_tokenizer, settings):
    seeds = [f"g{i}" for i in range(2 * WORKERS + 1)]
    _, stats = _check(
        qwen3_tokenizer, LATENCY, seeds, schedule="episode", env_isolation="thread", env_workers=WORKERS, **settings
    )
    # envs answer within 10 ms: a call waits its window only for a reset that needs a ready episode's worker
    assert stats.wall_s < 2.0
