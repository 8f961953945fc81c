"""Tree rollouts under history='template'/'window': every leaf holds the turn samples of its own path, and a
shared turn is trained once, with the weight tree credit gives its node under history='full'."""

from __future__ import annotations

import copy
from collections import defaultdict

import pytest
import torch

from tests.history.envs import Talk
from tests.history.training import fake_trainer, loss_rows, train_one_step
from trl_env import make_rollout_func, rollout
from trl_env.chat.template_processor import ChatTemplateProcessor
from trl_env.engine.tree import TreeShape
from trl_env.generation.kv_cache import EpisodeCacheGenerator
from trl_env.trainer.advantages import EpisodeCredit, compute_advantages, group_normalized_rewards
from trl_env.trainer.tree_turns import shared_turn_copies, turn_node
from trl_env.trainer.turn_samples import expand_turn_samples


def _key(sample):
    """A turn sample as the loss sees it: its prompt and its completion."""
    return tuple(sample["prompt_ids"]), tuple(sample["completion_ids"])


@pytest.mark.parametrize("history", ["template", "window"])
def test_every_leaf_has_the_turn_samples_of_its_own_path(history, qwen3_tokenizer, tiny_qwen3):
    end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[end])
    processor = ChatTemplateProcessor(qwen3_tokenizer, per_turn=True)
    episodes = rollout(
        Talk, ["a"] * 4, generator, processor, tokenizer=qwen3_tokenizer, history=history, history_window=1,
        max_turns=3, max_turn_tokens=6, tree=TreeShape((1, 2), 2), env_isolation="thread",
    )  # fmt: skip
    assert [e.tree_nodes for e in episodes] == [["0", "0.0"]] * 2 + [["0", "0.1"]] * 2
    for episode in episodes:
        episode.check(qwen3_tokenizer)
        assert episode.num_turns == 3 and [s.turn for s in episode.turn_samples] == [0, 1, 2]
        # its conversation is its own path: its turns, and its own env's answers to them (the env was forked)
        assert [m["content"] for m in episode.messages if m["role"] == "assistant"] == [
            t.completion for t in episode.turns
        ]
        assert episode.messages[4]["content"] == f"Turn 2 seen: {episode.turns[1].action[:20]!r}. Next."
        for sample in episode.turn_samples:
            messages = [episode.messages[i] for i in sample.message_indices]
            expected = qwen3_tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            assert sample.prompt_ids == list(expected)  # token for token, from its own messages
            start, stop = episode.turns[sample.turn].span
            assert sample.completion_ids[: stop - start] == episode.completion_ids[start:stop]
        shown = [s.message_indices for s in episode.turn_samples]
        assert shown == ([[0], [0, 1, 2], [0, 1, 2, 3, 4]] if history == "template" else [[0], [0, 1, 2], [0, 3, 4]])
    turns = [[(tuple(s.prompt_ids), tuple(s.completion_ids)) for s in e.turn_samples] for e in episodes]
    assert len({t[0] for t in turns}) == 1  # the trunk's turn: played once, in every leaf
    assert turns[0][1] == turns[1][1] != turns[2][1] == turns[3][1]  # turn 2: shared by the leaves of each fork
    assert len({t[1][0] for t in turns}) == 1  # ... from the trunk's one prompt
    assert len({t[2] for t in turns}) == 4  # turn 3: every leaf its own, prompted with its own turn 2


@pytest.mark.parametrize("history", ["template", "window"])
def test_a_grpo_step_trains_each_shared_turn_once_with_its_nodes_full_history_credit(
    history, qwen3_tokenizer, tiny_qwen3, tmp_path
):
    model = copy.deepcopy(tiny_qwen3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rollout_func = make_rollout_func(
        Talk, history=history, history_window=1, max_turns=3, max_turn_tokens=5, tree=TreeShape((1,), 2),
        env_isolation="thread",
    )  # fmt: skip
    batch, seen, trainer = train_one_step(model, qwen3_tokenizer, rollout_func, tmp_path, advantage_mode="tree")
    assert trainer.loss_type == "dapo" and trainer.state.global_step == 1
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    credits = [
        EpisodeCredit(rewards, [tuple(s) for s in spans], keys, len(ids), reward, failed, nodes, points)
        for rewards, spans, keys, ids, reward, failed, nodes, points in zip(
            batch["turn_rewards"], batch["turn_spans"], batch["state_keys"], batch["completion_ids"],
            batch["env_reward"], batch["failed"], batch["tree_nodes"], batch["tree_branch_points"], strict=True,
        )
    ]  # fmt: skip
    assert not any(batch["failed"]) and [len(c.tree_nodes) for c in credits] == [1] * 4  # 2 roots x 2 leaves
    # what tree credit gives under history='full': per token of each carrier (its model tokens are the full
    # sequence's, whose env tokens get 0), with TRL's own episode advantages
    episode = group_normalized_rewards(torch.tensor(batch["env_reward"], dtype=torch.float32), 4)
    full = compute_advantages(credits, 4, "tree", episode=episode)
    full_weight, full_tokens = defaultdict(float), 0
    for i, credit in enumerate(credits):
        for start, stop in credit.turn_spans:
            part = turn_node(credit, start) or f"leaf {i}"
            full_weight[part] += float(full[i, start:stop].sum())
            full_tokens += stop - start
    # what the loss saw: each turn sample's row, matched to the part of the tree it belongs to
    parts = {}
    for i, (credit, rows) in enumerate(zip(credits, batch["turn_samples"], strict=True)):
        for sample in rows:
            parts.setdefault(_key(sample), set()).add(turn_node(credit, sample["span"][0]) or f"leaf {i}")
    turn_weight, count = defaultdict(float), defaultdict(int)
    for prompt, completion, advantage, mask in loss_rows(seen):
        (part,) = parts[(tuple(prompt), tuple(completion))]
        count[(tuple(prompt), tuple(completion))] += 1
        turn_weight[part] += float((advantage * mask).sum())
    assert set(count) == set(parts) and set(count.values()) == {1}  # every distinct turn once: copies dropped
    assert len(count) == 2 + 4 * 2  # per root its shared first turn, per leaf its own two
    assert set(turn_weight) == set(full_weight)
    for part, weight in full_weight.items():
        assert turn_weight[part] == pytest.approx(weight, abs=1e-4), part
    assert any(abs(full_weight[node]) > 1e-3 for node in full_weight if not node.startswith("leaf"))
    assert float(seen["num_items_in_batch"]) == full_tokens  # the token denominator counts the copies, as 'full'


def _turn(start, length, tag):
    ids = [tag * 10 + k for k in range(1, length + 1)] + [9]
    return dict(turn=0, prompt_ids=[5, tag], completion_ids=ids, logprobs=[-1.0] * len(ids),
                env_mask=[1] * length + [0], span=[start, start + length])  # fmt: skip


@pytest.mark.parametrize("failed", [False, True])
@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "bnpo", "luspo"])
def test_the_tree_turn_loss_equals_tree_credit_on_the_full_sequences(loss_type, failed):
    """Two roots forked after their first turn into 2 leaves: the loss on the deduplicated turn samples equals
    TRL's loss on the leaves' single sequences with tree credit (the policy term at ratio 1), for every
    loss_type; with the first leaf failed its sibling owns the trunk."""
    trunks = [_turn(0, 3, 1), _turn(0, 2, 2)]  # each ends with a turn-end token: the fork is after it
    own = [_turn(4, 2, 3), _turn(4, 5, 4), _turn(3, 1, 5), _turn(3, 4, 6)]
    rows = [[trunks[i // 2], own[i]] for i in range(4)]
    credits = [
        EpisodeCredit(
            [0.0, 0.0], [tuple(s["span"]) for s in row], [None, None], row[1]["span"][1] + 1, reward,
            failed and i == 0, [str(i // 2)], [row[1]["span"][0]],
        )
        for i, (row, reward) in enumerate(zip(rows, [1.0, 0.0, 0.5, 0.25], strict=True))
    ]  # fmt: skip
    rewards = torch.tensor([float("nan") if c.failed else c.episode_reward for c in credits])
    advantages = compute_advantages(credits, 4, "tree", episode=group_normalized_rewards(rewards, 4), width=10)
    mask = torch.zeros(4, 10)
    for i, credit in enumerate(credits):
        for start, stop in credit.turn_spans:
            mask[i, start:stop] = 1
    output = {"advantages": advantages, "completion_ids": torch.zeros(4, 10, dtype=torch.long)}
    copies = shared_turn_copies(credits, 4, 0, rows)
    owner = 1 if failed else 0  # the first scorable leaf through the first trunk
    assert copies == [[owner != 0, False], [owner != 1, False], [False, False], [True, False]]
    new = expand_turn_samples(fake_trainer(loss_type), output, rows, cap=None, copies=copies)
    turn_mask = (new["completion_mask"] * new["tool_mask"]).float()
    per_token = new["advantages"] * turn_mask
    if loss_type == "grpo":  # mean over samples of each sample's token mean
        turns = (per_token.sum(-1) / turn_mask.sum(-1)).mean()
        full = ((advantages * mask).sum(-1) / mask.sum(-1)).mean()
    elif loss_type == "luspo":  # mean over samples of each sample's token sum
        turns, full = per_token.sum(-1).mean(), (advantages * mask).sum(-1).mean()
    elif loss_type == "bnpo":  # token sum over the batch's own token count
        turns, full = per_token.sum() / turn_mask.sum(), (advantages * mask).sum() / mask.sum()
    else:  # dapo: token sum over num_items_in_batch
        turns, full = per_token.sum() / new["num_items_in_batch"], (advantages * mask).sum() / mask.sum()
        assert float(new["num_items_in_batch"]) == float(mask.sum())
    assert abs(float(full)) > 1e-3
    assert torch.allclose(turns, full, atol=1e-6)
    assert new["prompt_ids"].shape[0] == 6  # 2 trunks + 4 own turns: the trunk copies are dropped
