"""Tree rollouts: forks after chosen turns, shared prefixes played once, one sample per leaf path."""

from __future__ import annotations

import functools
import socket

import pytest

from tests.envs.basic import Latency
from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.engine.tree import TreeShape
from trl_env.envpool.replies import EnvContractError
from trl_env.testing import InstantGenerator

IM_END = 151645
TOKENS = 5


def _play(tokenizer, factory, seeds, *, tree, stop_prob=0.0, **settings):
    generator = InstantGenerator(range(100, 5000), stop_id=IM_END, stop_prob=stop_prob, seed=1)
    config = RolloutConfig(max_turns=3, max_turn_tokens=TOKENS, tree=tree, **settings)
    engine = RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, config)
    try:
        return engine.run(factory, seeds), engine.stats
    finally:
        engine.close()


@pytest.mark.parametrize("schedule", ["turn", "episode"])
@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_branches_share_their_prefix_and_then_go_their_own_way(qwen3_tokenizer, schedule, isolation):
    factory = functools.partial(Latency, mix=((0.0, 1.0),), turns=3)
    seeds = ["a"] * 4 + ["b"] * 4
    episodes, stats = _play(
        qwen3_tokenizer, factory, seeds, tree=TreeShape((1,), 4), schedule=schedule, env_isolation=isolation
    )
    assert [e.seed for e in episodes] == seeds and all(e.num_turns == 3 for e in episodes)
    assert [e.tree_nodes for e in episodes] == [["0"]] * 4 + [["1"]] * 4
    for root in (episodes[:4], episodes[4:]):
        (point,) = {tuple(e.tree_branch_points) for e in root}
        shared = {tuple(e.completion_ids[: point[0]]) for e in root}
        assert len(shared) == 1  # the first turn and the env's answer to it, played once
        assert len({tuple(e.completion_ids[point[0] :]) for e in root}) == 4  # each branch sampled its own turns
        # each branch's env went on from the fork alone: its turn-2 observation echoes its own action
        for episode in root:
            assert episode.turns[1].observation == f"turn 2: {episode.turns[1].action[:10]}"
    # the shared first turn is sampled once per root: per root 1 + 4 x 2 turns of TOKENS tokens
    assert stats.sampled_tokens == 2 * (1 + 4 * 2) * TOKENS


def test_an_episode_over_before_its_fork_is_copied_as_one_shared_node(qwen3_tokenizer):
    factory = functools.partial(Latency, mix=((0.0, 1.0),), turns=1)  # over after turn 1: nothing to fork
    episodes, _ = _play(qwen3_tokenizer, factory, ["a"] * 4, tree=TreeShape((1, 2), 2), env_isolation="thread")
    assert len({tuple(e.completion_ids) for e in episodes}) == 1 and all(e.num_turns == 1 for e in episodes)
    end = len(episodes[0].completion_ids)
    assert [e.tree_nodes for e in episodes] == [["0", "0.0"], ["0", "0.0"], ["0", "0.1"], ["0", "0.1"]]
    assert all(e.tree_branch_points == [end, end] for e in episodes)
    assert len({id(e) for e in episodes}) == 4  # copies, not one object four times


def test_two_levels_give_every_leaf_its_path(qwen3_tokenizer):
    factory = functools.partial(Latency, mix=((0.0, 1.0),), turns=3)
    episodes, stats = _play(qwen3_tokenizer, factory, ["s"] * 6, tree=TreeShape((1, 2), (2, 3)), env_isolation="thread")
    assert [e.tree_nodes for e in episodes] == [["0", "0.0"]] * 3 + [["0", "0.1"]] * 3
    assert stats.sampled_tokens == (1 + 2 + 6) * TOKENS


class HoldsASocket(Latency):
    def reset(self, seed):
        self.sock = socket.socket()
        return super().reset(seed)

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_an_env_that_cannot_be_copied_is_a_clear_error(qwen3_tokenizer, isolation):
    with pytest.raises(EnvContractError, match="HoldsASocket"):
        _play(qwen3_tokenizer, HoldsASocket, ["a", "a"], tree=TreeShape((1,), 2), env_isolation=isolation)


def test_seeds_must_come_in_blocks_of_equal_seeds(qwen3_tokenizer):
    with pytest.raises(ValueError, match="block of 2 consecutive seeds"):
        _play(qwen3_tokenizer, Latency, ["a", "b"], tree=TreeShape((1,), 2), env_isolation="thread")
