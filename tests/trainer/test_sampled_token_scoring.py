"""SampledTokenScoring: one real GRPO step with and without it gives the same model, scoring far fewer positions."""

import copy

import pytest
import torch
import trl.trainer.utils as trl_utils
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

from tests.trainer.test_turn_level_grpo import make_rollout_func
from trl_env import env_reward
from trl_env.trainer import sampled_token_scoring
from trl_env.trainer.recipe import TrainSettings, with_lora
from trl_env.trainer.sampled_token_scoring import SampledTokenGRPOTrainer
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer


def train_one_step(trainer_class, model, tokenizer, tmp_path, monkeypatch, **kwargs):
    """Two steps of a LoRA adapter with a KL penalty (the reference, the model without its adapter, is scored after
    generation too).

    Returns the trainer and, per LM-head call, how many positions it projected onto the vocabulary.
    """
    rollout_func, _ = make_rollout_func(tokenizer)
    args = GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4, max_completion_length=16,
        max_steps=2, learning_rate=1e-2, beta=0.1, logging_steps=1, report_to="none", use_cpu=True,
        save_strategy="no", bf16=False, seed=0,
    )  # fmt: skip
    torch.manual_seed(0)  # the adapter's initial weights
    trainer = trainer_class(
        model=with_lora(model, TrainSettings(lora_r=4)), processing_class=tokenizer, reward_funcs=[env_reward],
        args=args, train_dataset=Dataset.from_dict({"prompt": ["seed-0"] * 8}), rollout_func=rollout_func, **kwargs,
    )  # fmt: skip
    projected = []
    lm_head = trl_utils._ChunkedLogProbFunction

    class Counting:  # a spy on TRL's LM-head kernel: the rows of hidden states it receives
        @staticmethod
        def apply(hidden, *args):
            projected.append(hidden.size(0))
            return lm_head.apply(hidden, *args)

    monkeypatch.setattr(trl_utils, "_ChunkedLogProbFunction", Counting)
    trainer.train()
    return trainer, projected


@pytest.mark.parametrize("ours", [SampledTokenGRPOTrainer, TurnLevelGRPOTrainer])
def test_training_gives_the_same_model_scoring_only_the_sampled_tokens(
    ours, qwen3_tokenizer, tiny_qwen3, tmp_path, monkeypatch
):
    kwargs = {"advantage_mode": "episode"} if ours is TurnLevelGRPOTrainer else {}
    trl, trl_projected = train_one_step(
        GRPOTrainer, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, tmp_path / "trl", monkeypatch
    )
    mine, my_projected = train_one_step(
        ours, copy.deepcopy(tiny_qwen3), qwen3_tokenizer, tmp_path / "ours", monkeypatch, **kwargs
    )
    # the same updates: every weight, and the logged loss, gradient norm, KL and entropy (over the sampled tokens)
    for (name, theirs), mine_weight in zip(trl.model.named_parameters(), mine.model.parameters(), strict=True):
        assert torch.allclose(theirs, mine_weight, atol=1e-6), name
    lora = [p for name, p in trl.model.named_parameters() if "lora_B" in name]
    assert any(p.abs().sum() > 0 for p in lora)  # the step did train (lora_B starts at 0)
    logged = trl.state.log_history[1], mine.state.log_history[1]  # step 2: the policy has moved from the reference
    for key in ("loss", "grad_norm", "kl", "entropy"):
        assert logged[0][key] == pytest.approx(logged[1][key], rel=1e-4, abs=1e-6), key
    assert logged[0]["kl"] > 0
    # what was projected: TRL 1.16 on CPU scores every position of prompt and completion (4 rows x 10 positions;
    # 1.15 the 24 completion tokens), the mixin only the model's own tokens (the episodes' mask-1 tokens: 6 + 4 +
    # 3 + 5), for the reference model after generation and for the policy in the loss
    rollout_func, _ = make_rollout_func(qwen3_tokenizer)
    sampled = sum(sum(mask) for mask in rollout_func(["seed-0"] * 4, None)["env_mask"])
    assert my_projected == [sampled] * 4  # 2 steps
    assert trl_projected[0] > sampled


def test_rows_that_are_not_the_rollouts_are_scored_at_every_completion_position():
    """After generation the env masks are used only for the very rows they came with (e.g. not for turn samples)."""
    ids = [[3, 4, 5], [6, 7]]
    scoring = sampled_token_scoring.SampledTokenScoring()
    scoring._rollout_rows = (ids, [[1, 0, 1], [0, 1]])
    same = torch.tensor([[9, 3, 4, 5], [9, 6, 7, 0]])  # prompt token 9, then the completion (padded)
    assert scoring._scored_positions(same, 3).tolist() == [[True, False, True], [False, True, True]]
    assert scoring._scored_positions(torch.tensor([[9, 3, 4, 6], [9, 6, 7, 0]]), 3) is None
    assert scoring._scored_positions(same[:1], 3) is None
