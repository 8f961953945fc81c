"""TurnLevelGRPOTrainer end to end: a real TRL GRPOTrainer step on the tiny Qwen3, advantages seen by the loss."""

import copy
from dataclasses import replace

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from trl_env import env_reward
from trl_env.trainer import turn_level_grpo
from trl_env.trainer.advantages import EpisodeCredit, compute_advantages, episode_advantages
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer

# One group of four episodes: (pieces of (source, length)), turn rewards, state keys. "m" = model tokens, "e" = env.
EPISODES = [
    ([("m", 3), ("e", 2), ("m", 3)], [0.0, 1.0], ["start", "mid"]),
    ([("m", 2), ("e", 1), ("m", 2)], [0.5, 0.0], ["start", "mid"]),
    ([("m", 3)], [0.2], ["start"]),
    ([("m", 2), ("e", 2), ("m", 1), ("e", 1), ("m", 2)], [0.0, 0.0, 1.0], ["start", "other", "mid"]),
]


def make_rollout_func(tokenizer, failed=(False, False, False, False), keys=("turn_rewards", "turn_spans")):
    """A rollout_func returning fixed episodes (no generation): sample k's completion starts with a token naming k."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    words = tokenizer.encode(" the cat sat on a mat by the door", add_special_tokens=False)
    markers = tokenizer.encode(" zero one two three", add_special_tokens=False)

    def rollout_func(prompts, trainer):
        batch = {k: [] for k in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "failed")}
        batch.update({k: [] for k in ("turn_rewards", "turn_spans", "state_keys")})
        for k, prompt in enumerate(prompts):
            pieces, rewards, state_keys = EPISODES[k % 4]
            ids, mask, spans = [], [], []
            for source, length in pieces:
                if source == "m":
                    spans.append((len(ids), len(ids) + length))
                ids += words[len(ids) : len(ids) + length]
                mask += [int(source == "m")] * length
            ids[0], ids[-1] = markers[k % 4], end
            batch["prompt_ids"].append(tokenizer.encode(prompt, add_special_tokens=False))
            batch["completion_ids"].append(ids)
            batch["logprobs"].append([0.0] * len(ids))
            batch["env_mask"].append(mask)
            batch["env_reward"].append(sum(rewards))
            batch["failed"].append(failed[k % 4])
            batch["turn_rewards"].append(rewards)
            batch["turn_spans"].append(spans)
            batch["state_keys"].append(state_keys)
        for key in {"turn_rewards", "turn_spans"} - set(keys):
            del batch[key]
        return batch

    return rollout_func, markers


def expected_credits(rollout_func):
    batch = rollout_func(["seed-0"] * 4, None)
    return [
        EpisodeCredit(r, s, k, len(ids), episode_reward=sum(r), failed=f)
        for r, s, k, ids, f in zip(
            batch["turn_rewards"],
            batch["turn_spans"],
            batch["state_keys"],
            batch["completion_ids"],
            batch["failed"],
            strict=True,
        )
    ]


def run_one_step(trainer_class, model, tokenizer, rollout_func, tmp_path, reward_funcs=(env_reward,), **kwargs):
    """Train one step; returns what ``_compute_loss`` saw and the trainer."""
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
        max_steps=1, learning_rate=1e-3, beta=0.0, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", bf16=False, seed=0,
    )  # fmt: skip
    trainer = trainer_class(
        model=model,
        processing_class=tokenizer,
        reward_funcs=list(reward_funcs),
        args=args,
        train_dataset=Dataset.from_dict({"prompt": ["seed-0"] * 8}),
        rollout_func=rollout_func,
        **kwargs,
    )
    seen = []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        seen.append({key: inputs[key].detach().clone() for key in ("advantages", "completion_ids")})
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    assert len(seen) == 1
    return seen[0], trainer


def in_sample_order(seen, markers):
    """The loss's rows (TRL shuffles them) back in the rollout's order, found by each completion's first token."""
    order = [markers.index(int(first)) for first in seen["completion_ids"][:, 0]]
    assert sorted(order) == [0, 1, 2, 3]
    return seen["advantages"][torch.tensor(order).argsort()]


def reward_none_for_two(completions, env_reward, **kwargs):
    """Sample 2 (three tokens long) is unscorable: TRL's signal, no `failed` flag."""
    return [None if len(ids) == 3 else r for ids, r in zip(kwargs["completion_ids"], env_reward, strict=True)]


@pytest.mark.parametrize(("mode", "signal"), [("turn", "flag"), ("anchor", "flag"), ("turn", "reward_none")])
def test_the_loss_sees_the_2d_turn_level_advantages(mode, signal, qwen3_tokenizer, tiny_qwen3, tmp_path):
    flagged = signal == "flag"
    rollout_func, markers = make_rollout_func(qwen3_tokenizer, failed=(False, False, flagged, False))
    model = copy.deepcopy(tiny_qwen3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seen, trainer = run_one_step(
        TurnLevelGRPOTrainer, model, qwen3_tokenizer, rollout_func, tmp_path,
        reward_funcs=[env_reward] if flagged else [reward_none_for_two], advantage_mode=mode, gamma=0.9,
    )  # fmt: skip
    advantages = in_sample_order(seen, markers)
    credits = [replace(c, failed=True) if k == 2 else c for k, c in enumerate(expected_credits(rollout_func))]
    expected = compute_advantages(credits, 4, mode, gamma=0.9)
    assert advantages.shape == (4, 8) and expected.shape == (4, 8)  # (batch, padded completion length)
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert (advantages[2] == 0).all()  # the failed episode
    assert (advantages[0, 3:5] == 0).all() and (advantages[1, 5:] == 0).all()  # env tokens, padding
    assert advantages[0, 0] != advantages[0, 5]  # the two turns of one episode get different credit
    assert trainer.state.global_step == 1
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_episode_mode_equals_trl_and_failed_equals_trl_unscorable(qwen3_tokenizer, tiny_qwen3, tmp_path):
    failed = (False, True, False, False)
    rollout_func, markers = make_rollout_func(qwen3_tokenizer, failed=failed)

    def reward_or_none(completions, env_reward, failed, **kwargs):
        return [None if f else r for r, f in zip(env_reward, failed, strict=True)]

    trl_seen, _ = run_one_step(
        GRPOTrainer, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path / "trl", [reward_or_none]
    )
    ours_seen, _ = run_one_step(
        TurnLevelGRPOTrainer, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path / "ours",
        advantage_mode="episode",
    )  # fmt: skip
    trl = in_sample_order(trl_seen, markers)
    assert trl.shape == (4,) and trl[1] == 0 and trl.abs().sum() > 0
    assert torch.equal(in_sample_order(ours_seen, markers), trl)  # `failed` handled as TRL's unscorable
    credits = expected_credits(rollout_func)
    assert torch.equal(episode_advantages(credits, 4), trl)  # bit for bit
    tokens = compute_advantages(credits, 4, "episode")
    for k, credit in enumerate(credits):
        for start, end in credit.turn_spans:
            assert (tokens[k, start:end] == trl[k]).all()


def make_tree_rollout_func(tokenizer, rewards=(1.0, 0.0, 0.0, 0.0)):
    """Two trunks (the same tokens in both of their copies) forked into two leaves each; leaf k starts with marker k."""
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    words = tokenizer.encode(" the cat sat on a mat by the door", add_special_tokens=False)
    markers = tokenizer.encode(" zero one two three", add_special_tokens=False)
    trunks = {"a": words[0:3], "b": words[3:6]}  # two model tokens, then one env token

    def rollout_func(prompts, trainer):
        batch = {key: [] for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward", "failed")}
        batch.update(
            {key: [] for key in ("turn_rewards", "turn_spans", "state_keys", "tree_nodes", "tree_branch_points")}
        )
        for k, prompt in enumerate(prompts):
            node = f"{'ab'[k % 4 // 2]}{k // 4}"  # node ids unique within the batch: trunk letter, group number
            ids = trunks[node[0]] + [markers[k % 4], words[6], end]
            batch["prompt_ids"].append(tokenizer.encode(prompt, add_special_tokens=False))
            batch["completion_ids"].append(ids)
            batch["logprobs"].append([0.0] * 6)
            batch["env_mask"].append([1, 1, 0, 1, 1, 1])
            batch["env_reward"].append(rewards[k % 4])
            batch["failed"].append(False)
            batch["turn_rewards"].append([0.0, rewards[k % 4]])
            batch["turn_spans"].append([(0, 2), (3, 6)])
            batch["state_keys"].append([node, None])
            batch["tree_nodes"].append([node])
            batch["tree_branch_points"].append([3])
        return batch

    return rollout_func, markers


def test_tree_mode_credits_each_trunk_once_in_the_loss(qwen3_tokenizer, tiny_qwen3, tmp_path):
    rollout_func, markers = make_tree_rollout_func(qwen3_tokenizer)
    model = copy.deepcopy(tiny_qwen3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seen, trainer = run_one_step(
        TurnLevelGRPOTrainer, model, qwen3_tokenizer, rollout_func, tmp_path, advantage_mode="tree"
    )
    order = [markers.index(int(ids[3])) for ids in seen["completion_ids"]]  # the leaf's first token names it
    advantages = seen["advantages"][torch.tensor(order).argsort()]
    # leaves 1, 0, 0, 0: mean 0.25, std 0.5; leaf (1 - 0.25) / 0.5001, (0 - 0.25) / 0.5001; trunk a mean 0.5, b 0
    one, zero, a = 1.4997001, -0.4999000, 0.4999000
    expected = torch.tensor(
        [
            [a, a, 0, one, one, one],
            [0, 0, 0, zero, zero, zero],
            [-a, -a, 0, zero, zero, zero],
            [0, 0, 0, zero, zero, zero],
        ]
    )
    assert torch.allclose(advantages, expected, atol=1e-6)
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with pytest.raises(KeyError, match=r"in mode tree; missing \['tree_nodes', 'tree_branch_points'\]"):

        def no_tree(prompts, trainer):
            batch = rollout_func(prompts, trainer)
            del batch["tree_nodes"], batch["tree_branch_points"]
            return batch

        run_one_step(TurnLevelGRPOTrainer, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, no_tree, tmp_path / "no-tree",
                     advantage_mode="tree")  # fmt: skip


def test_missing_extra_keys_fail_clearly(qwen3_tokenizer, tiny_qwen3, tmp_path):
    rollout_func, _ = make_rollout_func(qwen3_tokenizer, keys=("turn_rewards",))
    with pytest.raises(KeyError, match=r"sample 0: the rollout_func must return .*missing \['turn_spans'\]"):
        run_one_step(TurnLevelGRPOTrainer, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path)


def test_docstring_examples_run():
    import doctest

    result = doctest.testmod(turn_level_grpo, optionflags=doctest.ELLIPSIS)
    assert result.attempted == 1 and result.failed == 0
