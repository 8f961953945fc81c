"""Zero-variance groups (RolloutConfig.zero_variance): replaced from new seeds, or filtered out of the loss.

``SeedDecides`` scores seed "flat:R" R for every answer (a zero-variance group) and any other seed by a digest
of the answer (variance with a random model). ``shuffle_dataset=False`` makes TRL's batches the dataset's
order, so each test knows which groups a step holds and which seeds are left to draw replacements from.
"""

from __future__ import annotations

import copy
import functools

import pytest
import torch

from tests.envs.basic import SeedDecides
from tests.grpo_helpers import make_trainer
from trl_env import ChatTemplateProcessor, make_rollout_func
from trl_env.engine.config import RolloutConfig
from trl_env.engine.rollout import RolloutEngine
from trl_env.engine.tree import TreeShape
from trl_env.errors import ConfigError
from trl_env.testing.instant_generator import InstantGenerator
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer
from trl_env.trainer.zero_variance import GroupFilter, SeedDraw

ROLLOUT = dict(max_turns=1, max_turn_tokens=6, env_isolation="thread")


def recording(rollout_func, batches):
    """The rollout_func, keeping each batch it returns (and its seeds) for the test to read."""

    def record(prompts, trainer):
        batch = rollout_func(prompts, trainer)
        batches.append(batch)
        return batch

    return record


def batch_seeds(batch):
    return [text.split("Say anything (")[1].split(")")[0] for text in batch["transcript"]]


def step_log(trainer):
    return next(entry for entry in trainer.state.log_history if "groups/extra_episodes" in entry)


@pytest.fixture
def engine(qwen3_tokenizer):
    generator = InstantGenerator(range(1000, 2000), stop_id=qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>"))
    engine = RolloutEngine(generator, ChatTemplateProcessor(qwen3_tokenizer), qwen3_tokenizer, RolloutConfig(**ROLLOUT))
    yield engine
    engine.close()


def test_a_zero_variance_group_is_replaced_by_the_first_new_group_with_variance(engine):
    play = functools.partial(engine.run, SeedDecides)
    draw = SeedDraw(["flat:0", "flat:2", "vary-1"], seed=0)
    seeds = ["vary-0"] * 2 + ["flat:1"] * 2 + ["flat:0"] * 2
    batch = GroupFilter("resample", 2, max_extra_episodes=4, draw=draw).play(play, seeds)
    assert len(batch) == len(seeds)
    assert [e.seed for e in batch[:2]] == ["vary-0"] * 2  # a group with variance stays where it was
    # flat:0 is in the batch, so the one round's draws are flat:2 (no variance: discarded) and vary-1, which takes
    # the first zero-variance slot; the budget is then spent, so the second slot's group stays, marked dropped
    assert [e.seed for e in batch[2:4]] == ["vary-1"] * 2
    assert [e.seed for e in batch[4:]] == ["flat:0"] * 2 and batch.dropped == [False] * 4 + [True] * 2
    assert batch.stats["zero_variance"] == 2 and batch.stats["replaced"] == 1 and batch.stats["dropped"] == 1
    assert {e.seed for e in batch.discarded} == {"flat:1", "flat:2"}


@pytest.mark.parametrize(("budget", "played"), [(3, 2), (4, 4), (11, 10)])
def test_replacements_stop_at_the_episode_budget(engine, budget, played):
    play = functools.partial(engine.run, SeedDecides)
    draw = SeedDraw(["flat:2", "flat:3"], seed=0)  # every replacement has zero variance too
    seeds = ["flat:0"] * 2 + ["flat:1"] * 2
    batch = GroupFilter("resample", 2, max_extra_episodes=budget, draw=draw).play(play, seeds)
    assert batch.stats["extra_episodes"] == played <= budget  # whole groups only, never past the budget
    assert batch.stats["extra_discarded"] == played // 2 and batch.stats["dropped"] == 2
    assert [e.seed for e in batch] == seeds and all(batch.dropped)


def test_filter_only_plays_no_extra_episode(engine):
    play = functools.partial(engine.run, SeedDecides)
    batch = GroupFilter("filter", 2, max_extra_episodes=None).play(play, ["flat:0"] * 2 + ["vary-0"] * 2)
    assert batch.stats["extra_episodes"] == 0 and batch.dropped == [True, True, False, False]


def test_a_batch_of_split_groups_is_refused(engine):
    with pytest.raises(ConfigError, match="whole GRPO groups"):
        GroupFilter("filter", 4, None).play(functools.partial(engine.run, SeedDecides), ["a", "a", "b", "b"])


def test_filtered_samples_contribute_nothing_to_the_loss(qwen3_tokenizer, tiny_model_dir, tmp_path):
    batches = []
    rollout_func = make_rollout_func(
        SeedDecides, ChatTemplateProcessor(qwen3_tokenizer), zero_variance="filter", **ROLLOUT
    )
    trainer = make_trainer(  # from a folder: beta > 0 loads the reference model from it
        str(tiny_model_dir), qwen3_tokenizer, recording(rollout_func, batches), tmp_path,
        steps=1, per_device_train_batch_size=8, prompts=["flat:1", "vary-0"], shuffle_dataset=False, beta=0.1,
    )  # fmt: skip
    seen = []
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        seen.append(inputs)
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    trainer.train()
    assert batch_seeds(batches[0]) == ["flat:1"] * 4 + ["vary-0"] * 4
    assert batches[0]["zero_variance"] == [True] * 4 + [False] * 4
    masks = [inputs["completion_mask"] * inputs["tool_mask"] for inputs in seen]  # TRL's micro-batches, shuffled
    # the 4 filtered samples have no token in the loss or the KL term (both use this mask); every other has some
    assert sum(int((mask.sum(1) == 0).sum()) for mask in masks) == 4 and sum(len(mask) for mask in masks) == 8
    assert all(inputs["num_items_in_batch"] == sum(mask.sum() for mask in masks) for inputs in seen)  # denominator
    for inputs, mask in zip(seen, masks, strict=True):  # the loss (policy and KL, beta=0.1) is the same without them
        rows = mask.sum(1) > 0
        kept = {
            k: v[rows] if torch.is_tensor(v) and v.dim() > 0 and len(v) == len(rows) else v for k, v in inputs.items()
        }
        with torch.no_grad():
            assert torch.allclose(compute_loss(trainer.model, inputs), compute_loss(trainer.model, kept))
    log = step_log(trainer)
    assert log["groups/zero_variance_fraction"] == 0.5 and log["groups/dropped"] == 1
    assert log["groups/extra_episodes"] == 0


def test_resample_trains_a_new_seed_in_place_of_a_zero_variance_group(qwen3_tokenizer, tiny_qwen3, tmp_path):
    batches = []
    rollout_func = make_rollout_func(
        SeedDecides, ChatTemplateProcessor(qwen3_tokenizer), zero_variance="resample", max_extra_episodes=8, **ROLLOUT
    )
    prompts = ["flat:1", "vary-0", "flat:0", "vary-1"]  # the step plays the first two; the others are drawn
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, recording(rollout_func, batches), tmp_path,
        steps=1, per_device_train_batch_size=8, prompts=prompts, shuffle_dataset=False,
    )  # fmt: skip
    trainer.train()
    # vary-1 fills the slot, drawn first or after flat:0 (no variance: discarded, then never drawn again)
    assert batch_seeds(batches[0]) == ["vary-1"] * 4 + ["vary-0"] * 4
    log = step_log(trainer)
    assert log["groups/zero_variance_fraction"] == 0.5 and log["groups/replaced"] == 1 and log["groups/dropped"] == 0
    assert log["groups/extra_episodes"] == 4 * (1 + log["groups/extra_discarded"]) <= 8
    assert batches[0]["zero_variance"] == [False] * 8 and all(any(mask) for mask in batches[0]["env_mask"])


def test_default_and_filter_play_the_same_tokens(qwen3_tokenizer, tiny_qwen3, tmp_path):
    prompts = ["flat:1"] * 4 + ["vary-0"] * 4
    outputs = {}
    for mode in ("keep", "filter"):
        rollout_func = make_rollout_func(  # one turn, one generator call: the sampling noise is the same
            SeedDecides, ChatTemplateProcessor(qwen3_tokenizer), zero_variance=mode, schedule="turn", **ROLLOUT
        )
        trainer = make_trainer(copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path / mode, steps=1)
        torch.manual_seed(0)
        outputs[mode] = rollout_func(prompts, trainer)
        rollout_func.engine.close()
    keep, filtered = outputs["keep"], outputs["filter"]
    assert "zero_variance" not in keep and not any(k.startswith("groups/") for k in trainer._metrics["train"])
    assert keep["completion_ids"] == filtered["completion_ids"] and keep["env_reward"] == filtered["env_reward"]
    assert keep["env_mask"][4:] == filtered["env_mask"][4:] and not any(map(any, filtered["env_mask"][:4]))


def test_resample_with_tree_rollouts(qwen3_tokenizer, tiny_qwen3, tmp_path):
    batches = []
    rollout_func = make_rollout_func(
        functools.partial(SeedDecides, turns=2), ChatTemplateProcessor(qwen3_tokenizer),
        zero_variance="resample", tree=TreeShape((1,), 2), **{**ROLLOUT, "max_turns": 2},
    )  # fmt: skip
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, recording(rollout_func, batches), tmp_path,
        steps=1, per_device_train_batch_size=8, prompts=["flat:1", "vary-0", "vary-1"], shuffle_dataset=False,
        trainer_class=TurnLevelGRPOTrainer, trainer_kwargs={"advantage_mode": "tree"}, max_completion_length=64,
    )  # fmt: skip
    trainer.train()
    batch = batches[0]
    assert batch_seeds(batch) == ["vary-1"] * 4 + ["vary-0"] * 4  # the only seed left to draw
    nodes = [node for leaf in batch["tree_nodes"][:4] for node in leaf]
    assert nodes and all(node.startswith("0/x1.") for node in nodes)  # the replacement's tree, named apart
    assert not set(nodes) & {node for leaf in batch["tree_nodes"][4:] for node in leaf}
    assert step_log(trainer)["groups/replaced"] == 1


def test_resample_under_pipelined_rollouts(qwen3_tokenizer, tiny_qwen3, tmp_path):
    batches = []
    rollout_func = make_rollout_func(
        SeedDecides, ChatTemplateProcessor(qwen3_tokenizer), zero_variance="resample", max_staleness=1, **ROLLOUT
    )
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, recording(rollout_func, batches), tmp_path, steps=2,
        per_device_train_batch_size=8, prompts=["flat:1", "vary-0", "flat:2", "vary-1", "vary-2", "vary-3"],
        shuffle_dataset=False, trainer_class=TurnLevelGRPOTrainer, trainer_kwargs={"advantage_mode": "episode"},
    )  # fmt: skip
    trainer.train()
    assert len(batches) == 2 and all(len(batch["completion_ids"]) == 8 for batch in batches)
    logs = [entry for entry in trainer.state.log_history if "groups/extra_episodes" in entry]
    assert len(logs) == 2 and logs[0]["groups/zero_variance_fraction"] == 0.5  # flat:1 in the first batch
    assert logs[0]["groups/replaced"] + logs[0]["groups/dropped"] == 1 and logs[0]["groups/extra_episodes"] <= 8
    seeds = batch_seeds(batches[0])
    assert seeds[4:] == ["vary-0"] * 4 and (seeds[0] != "flat:1") == (logs[0]["groups/replaced"] == 1)


def test_an_unknown_mode_is_refused():
    with pytest.raises(ConfigError, match="zero_variance must be one of"):
        RolloutConfig(zero_variance="drop")


def test_filter_takes_every_turn_sample_of_a_dropped_episode_out_of_the_loss(qwen3_tokenizer, tiny_qwen3, tmp_path):
    batches, seen = [], []
    rollout_func = make_rollout_func(
        functools.partial(SeedDecides, turns=2), zero_variance="filter", history="template",
        **{**ROLLOUT, "max_turns": 2},
    )  # fmt: skip
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, recording(rollout_func, batches), tmp_path,
        steps=1, per_device_train_batch_size=8, prompts=["flat:1", "vary-0"], shuffle_dataset=False,
        trainer_class=TurnLevelGRPOTrainer, trainer_kwargs={"advantage_mode": "episode"},
    )  # fmt: skip
    compute_loss = trainer._compute_loss
    trainer._compute_loss = lambda model, inputs: seen.append(inputs) or compute_loss(model, inputs)
    trainer.train()
    rows = batches[0]["turn_samples"]
    assert [len(row) for row in rows] == [2] * 8  # one sample per model turn
    assert all(not any(s["env_mask"]) for row in rows[:4] for s in row)  # the flat group's turns: masked
    assert all(any(s["env_mask"]) for row in rows[4:] for s in row)
    masks = torch.cat([inputs["completion_mask"] * inputs["tool_mask"] for inputs in seen])
    assert int((masks.sum(1) == 0).sum()) == 8 and len(masks) == 16  # 8 turn samples train nothing
    assert all(inputs["num_items_in_batch"] == masks.sum() for inputs in seen)
