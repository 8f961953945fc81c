"""Training on per-turn samples: a real GRPO step with history='template', a 40-turn episode under 'window'
that 'full' cuts, and the normalisation and cap of trl_env.trainer.turn_samples."""

from __future__ import annotations

import copy

import pytest
import torch
from datasets import Dataset
from trl import GRPOConfig

from tests.history.envs import LongCorridor, Talk, TalkApart
from tests.history.training import fake_trainer, loss_rows, train_one_step
from trl_env import env_reward, make_rollout_func, rollout
from trl_env.chat.template_processor import ChatTemplateProcessor
from trl_env.episode import StopReason
from trl_env.errors import ConfigError
from trl_env.generation.kv_cache import EpisodeCacheGenerator
from trl_env.trainer.advantages import EpisodeCredit, compute_advantages
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer
from trl_env.trainer.turn_samples import expand_turn_samples, select_turns


@pytest.mark.parametrize("mode", ["episode", "turn", "anchor"])
def test_a_real_grpo_step_trains_every_turn_sample_with_its_turns_advantage(
    mode, qwen3_tokenizer, tiny_qwen3, tmp_path
):
    model = copy.deepcopy(tiny_qwen3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    # TalkApart: a group of random episodes that all scored alike would train nothing, and the last assert would fail
    rollout_func = make_rollout_func(
        TalkApart, history="template", max_turns=3, max_turn_tokens=5, env_isolation="thread"
    )
    batch, seen, trainer = train_one_step(model, qwen3_tokenizer, rollout_func, tmp_path, advantage_mode=mode)
    assert len(set(batch["env_reward"])) > 1
    samples = [sample for rows in batch["turn_samples"] for sample in rows]
    assert len(samples) == sum(batch["num_turns"]) == seen["prompt_ids"].shape[0]  # one row per model turn
    credits = [
        EpisodeCredit(rewards, [tuple(s) for s in spans], keys, len(ids), reward)
        for rewards, spans, keys, ids, reward in zip(
            batch["turn_rewards"], batch["turn_spans"], batch["state_keys"], batch["completion_ids"],
            batch["env_reward"], strict=True,
        )
    ]  # fmt: skip
    expected = compute_advantages(credits, 4, mode)
    rows = loss_rows(seen)
    for episode, turn_rows in enumerate(batch["turn_samples"]):
        for sample in turn_rows:
            (row,) = [r for r in rows if r[0] == sample["prompt_ids"] and r[1] == sample["completion_ids"]]
            value = float(expected[episode, sample["span"][0]])
            assert torch.allclose(row[2][row[3].bool()], torch.tensor(value), atol=1e-5)  # its turn's advantage
            assert row[3].tolist()[: len(sample["env_mask"])] == sample["env_mask"]
    assert "sampling_per_token_logps" in seen  # each turn sample carries its sampled logprobs
    assert trainer.state.global_step == 1
    assert any(not torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_forty_turns_fit_a_1024_token_budget_with_window_but_not_with_full(qwen3_tokenizer, tiny_qwen3, tmp_path):
    budget = dict(max_turns=40, max_turn_tokens=4, max_completion_tokens=1024, env_isolation="thread")
    end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[end])
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    (full,) = rollout(LongCorridor, ["s"], generator, processor, tokenizer=qwen3_tokenizer, **budget)
    assert full.stop_reason == StopReason.TOKEN_BUDGET and full.num_turns < 40  # 'full' is cut
    assert len(full.completion_ids) <= 1024

    model = copy.deepcopy(tiny_qwen3)
    rollout_func = make_rollout_func(LongCorridor, history="window", history_window=4, max_turn_samples=8, **budget)
    batch, seen, trainer = train_one_step(
        model, qwen3_tokenizer, rollout_func, tmp_path, generations=2, advantage_mode="episode"
    )
    assert batch["num_turns"] == [40, 40]  # the whole episode is played
    for prompt_ids, rows in zip(batch["prompt_ids"], batch["turn_samples"], strict=True):
        assert len(rows) == 40
        assert all(len(r["prompt_ids"]) + len(r["completion_ids"]) <= len(prompt_ids) + 1024 for r in rows)
        assert max(len(r["prompt_ids"]) for r in rows) < 400  # the window bounds every prompt
    assert seen["prompt_ids"].shape[0] == 8  # max_turn_samples: 4 turns of each episode (fast on 2 cores)
    assert trainer.state.global_step == 1


def test_select_turns_shares_the_cap_equally():
    assert select_turns([10, 2, 6], cap=9, seed=1) == select_turns([10, 2, 6], cap=9, seed=1)
    kept = select_turns([10, 2, 6], cap=9, seed=1)
    assert [len(k) for k in kept] == [4, 2, 3] and all(k == sorted(set(k)) for k in kept)
    assert select_turns([3, 1], cap=None, seed=0) == [[0, 1, 2], [0]]
    with pytest.raises(ConfigError):
        select_turns([3, 3, 3], cap=2, seed=0)


def _turn(turn, start, length):
    ids = list(range(1, length + 1)) + [9]
    return dict(turn=turn, prompt_ids=[5] * (turn + 2), completion_ids=ids, logprobs=[-1.0] * len(ids),
                env_mask=[1] * length + [0], span=[start, start + length])  # fmt: skip


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "luspo"])
def test_an_episode_weighs_as_its_one_sequence_under_full(loss_type):
    """The loss on the turn samples equals TRL's loss on the episodes' single sequences (policy term = A per token)."""
    long = [_turn(0, 0, 3), _turn(1, 4, 5), _turn(2, 10, 2)]  # 3 turns, 10 tokens
    short = [_turn(0, 0, 4)]  # 1 turn, 4 tokens
    advantages = torch.tensor([1.0, -2.0])  # per episode (mode "episode")
    output = {"advantages": advantages, "completion_ids": torch.zeros(2, 12, dtype=torch.long)}
    new = expand_turn_samples(fake_trainer(loss_type), output, [long, short], cap=None)
    mask = (new["completion_mask"] * new["tool_mask"]).float()
    per_token = new["advantages"]  # the loss's per-token term at ratio 1
    tokens = torch.tensor([10.0, 4.0])
    if loss_type == "grpo":  # mean over samples of each sample's token mean
        turns = ((per_token * mask).sum(-1) / mask.sum(-1)).mean()
        full = advantages.mean()
    elif loss_type == "luspo":  # mean over samples of each sample's token sum
        turns = (per_token * mask).sum(-1).mean()
        full = (advantages * tokens).mean()
    else:  # dapo: token sum over num_items_in_batch
        turns = (per_token * mask).sum() / new["num_items_in_batch"]
        full = (advantages * tokens).sum() / tokens.sum()
    assert torch.allclose(turns, full)
    assert new["prompt_ids"].shape[0] == 4


def test_the_cap_reweights_to_an_unbiased_estimate_and_pads_to_whole_steps():
    rows = [[_turn(t, 4 * t, 3) for t in range(6)], [_turn(0, 0, 3)]]
    output = {"advantages": torch.tensor([1.0, 1.0]), "completion_ids": torch.zeros(2, 24, dtype=torch.long)}
    new = expand_turn_samples(fake_trainer("dapo", steps=2), output, rows, cap=3)
    assert new["prompt_ids"].shape[0] == 4  # 2 + 1 kept, padded to a multiple of steps_per_generation
    trained = (new["tool_mask"].sum(1) > 0).tolist()
    assert trained.count(True) == 3
    weights = new["advantages"][:, 0].tolist()
    assert sorted(weights) == [0.0, 1.0, 3.0, 3.0]  # 6 turns, 2 kept: weight 3; the filler trains nothing
    assert float(new["num_items_in_batch"]) == 3 * 3 + 3 * 3 + 3  # the estimated token count


def test_a_plain_grpo_trainer_is_refused(qwen3_tokenizer, tiny_qwen3, tmp_path):
    from tests.grpo_helpers import make_trainer

    rollout_func = make_rollout_func(Talk, history="template", max_turns=2, env_isolation="thread")
    trainer = make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1)
    with pytest.raises(ConfigError, match="TurnLevelGRPOTrainer"):
        trainer.train()


def test_pipelined_rollouts_train_turn_samples_with_the_importance_correction(qwen3_tokenizer, tiny_qwen3, tmp_path):
    """max_staleness=1: the turn samples carry their sampled logprobs and the off-policy correction applies."""
    rollout_func = make_rollout_func(
        Talk, history="window", history_window=1, max_turns=2, max_turn_tokens=4, max_staleness=1,
        env_isolation="thread",
    )  # fmt: skip
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_completion_length=64,
        max_steps=2, learning_rate=1e-3, beta=0.0, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", bf16=False, seed=0,
    )  # fmt: skip
    trainer = TurnLevelGRPOTrainer(
        model=copy.deepcopy(tiny_qwen3), processing_class=qwen3_tokenizer, reward_funcs=[env_reward], args=args,
        train_dataset=Dataset.from_dict({"prompt": [f"seed-{i}" for i in range(8)]}), rollout_func=rollout_func,
        advantage_mode="turn",
    )  # fmt: skip
    shapes = []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        shapes.append((inputs["prompt_ids"].shape[0], inputs["sampling_per_token_logps"].shape))
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    assert trainer.state.global_step == 2
    assert [rows for rows, _ in shapes] == [4, 4]  # 2 episodes x 2 turns per step
    logs = [h for h in trainer.state.log_history if "pipeline/staleness" in h]
    assert [h["pipeline/staleness"] for h in logs] == [0, 1]
    assert all("sampling/importance_sampling_ratio/mean" in h for h in logs)


def test_beta_above_zero_gives_every_turn_sample_its_reference_logprobs(qwen3_tokenizer, tiny_model_dir, tmp_path):
    """beta > 0: the loss batch holds the reference model's logprobs of each turn sample (its own prompt)."""
    rollout_func = make_rollout_func(Talk, history="template", max_turns=2, max_turn_tokens=4, env_isolation="thread")
    batch, seen, trainer = train_one_step(str(tiny_model_dir), qwen3_tokenizer, rollout_func, tmp_path, beta=0.5)
    assert seen["prompt_ids"].shape[0] == sum(batch["num_turns"])  # the turn samples, not the carriers
    ids = torch.cat([seen["prompt_ids"], seen["completion_ids"]], dim=1)
    mask = torch.cat([seen["prompt_mask"], seen["completion_mask"]], dim=1)
    width = seen["completion_ids"].shape[1]
    with torch.no_grad():  # the reference model (loaded by TRL from the same folder) on each row, by hand
        logits = trainer.ref_model(input_ids=ids, attention_mask=mask).logits[:, -width - 1 : -1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, seen["completion_ids"].unsqueeze(-1)).squeeze(-1)
    trained = (seen["completion_mask"] * seen["tool_mask"]).bool()
    assert torch.allclose(seen["ref_per_token_logps"][trained], expected[trained], atol=1e-4)
    assert trainer.state.global_step == 1
    assert any("kl" in h for h in trainer.state.log_history)
