"""Pipelined rollouts (make_rollout_func(max_staleness=N)): the bound, the order, the failures, real training."""

from __future__ import annotations

import _thread
import copy
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from transformers import TrainerCallback
from trl import GRPOTrainer

from tests.envs.basic import Counting
from tests.grpo_helpers import make_trainer
from trl_env import make_rollout_func
from trl_env.errors import ConfigError
from trl_env.testing.instant_generator import ContextHashGenerator
from trl_env.trainer.pipeline import RolloutPipeline, RolloutPipelineError
from trl_env.trainer.pipelined_training import PublishPolicy
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer

# -- the pipeline on its own: a play function instead of the engine ------------------------------------------------


def recording_play(log: list, delay: float = 0.0):
    def play(seeds):
        log.append(("start", tuple(seeds), time.perf_counter()))
        time.sleep(delay)
        return [f"episode-{seed}" for seed in seeds]

    return play


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_a_batch_starts_within_the_bound_and_ahead_of_its_step(max_staleness):
    batches = [[f"s{i}"] for i in range(8)]
    starts: list = []
    pipeline = RolloutPipeline(recording_play(starts), iter(batches), max_staleness=max_staleness)
    versions_at_start = {}
    for step, seeds in enumerate(batches):
        played = pipeline.take(seeds, step)
        assert played.episodes == [f"episode-{seeds[0]}"] and not played.replayed
        assert 0 <= step - played.version <= max_staleness
        versions_at_start[step] = played.version
        time.sleep(0.05)  # "training": the next batches are played meanwhile
        pipeline.publish(step + 1)
    pipeline.close()
    assert [s[1] for s in starts] == [tuple(b) for b in batches]  # every batch played once, in order
    assert max(step - v for step, v in versions_at_start.items()) == max_staleness  # it does run ahead
    assert pipeline.replayed == 0


def test_a_batch_never_starts_before_its_policy_is_published():
    starts: list = []
    pipeline = RolloutPipeline(recording_play(starts), iter([["a"], ["b"], ["c"], ["d"]]), max_staleness=1)
    pipeline.take(["a"], 0)
    time.sleep(0.2)
    started = [s[1] for s in starts]
    assert started == [("a",), ("b",)]  # "c" is for step 2 and needs version 1, not yet published
    pipeline.publish(1)
    pipeline.take(["b"], 1)
    time.sleep(0.2)
    assert [s[1] for s in starts] == [("a",), ("b",), ("c",)]
    pipeline.close()


def test_prompts_other_than_planned_are_played_again_and_counted():
    starts: list = []
    pipeline = RolloutPipeline(recording_play(starts), iter([["a"], ["b"], ["c"], ["d"]]), max_staleness=1)
    assert pipeline.take(["a"], 0).episodes == ["episode-a"]
    pipeline.publish(1)
    played = pipeline.take(["c"], 1)  # TRL skipped "b" (e.g. a resume): the twin re-aligns on "c"
    assert played.episodes == ["episode-c"] and played.replayed and pipeline.replayed == 1
    pipeline.publish(2)
    assert pipeline.take(["d"], 2).episodes == ["episode-d"]  # and looks ahead again from there
    pipeline.close()


def test_a_background_error_surfaces_with_its_traceback():
    def play(seeds):
        if seeds == ["b"]:
            raise ValueError("the env server is gone")
        return list(seeds)

    pipeline = RolloutPipeline(play, iter([["a"], ["b"]]), max_staleness=1)
    pipeline.take(["a"], 0)
    pipeline.publish(1)
    with pytest.raises(RolloutPipelineError, match="(?s)Traceback.*ValueError: the env server is gone") as caught:
        pipeline.take(["b"], 1)
    assert isinstance(caught.value.__cause__, ValueError)
    pipeline.close()


def test_close_does_not_wait_for_a_rollout_that_never_ends():
    release = threading.Event()
    pipeline = RolloutPipeline(lambda seeds: release.wait(), iter([["a"], ["b"]]), max_staleness=1)
    pipeline._fill(0)  # queue the batches as the first take would, without waiting for them
    time.sleep(0.1)
    start = time.perf_counter()
    pipeline.close()
    assert time.perf_counter() - start < 2.0
    release.set()


def test_ctrl_c_inside_take_aborts_the_batch_in_flight_and_ends_the_thread():
    """A Ctrl-C while the trainer waits: the pipeline closes, ``abort`` cuts the batch short, the thread ends (a
    daemon left inside a batch while the interpreter finalizes could deadlock the exit)."""
    release, aborted = threading.Event(), []
    pipeline = RolloutPipeline(
        lambda seeds: release.wait(60) and list(seeds),
        iter([["a"], ["b"], ["c"]]),
        max_staleness=1,
        abort=lambda: aborted.append(True) or release.set(),
    )
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever an earlier test installed
    try:
        threading.Timer(0.3, _thread.interrupt_main).start()  # what SIGINT does to the main thread
        with pytest.raises(KeyboardInterrupt):
            pipeline.take(["a"], 0)
    finally:
        signal.signal(signal.SIGINT, handler)
    assert pipeline.closed and aborted == [True]
    pipeline._thread.join(timeout=10)  # close() waited 1 s; a loaded machine may need longer
    assert not pipeline._thread.is_alive()
    pipeline.close()  # idempotent: abort is not called twice
    assert aborted == [True]


# -- with a real GRPOTrainer ------------------------------------------------------------------------------------


class Recorder:
    """A reward function that records what each step was given (extra keys reach reward functions)."""

    __name__ = "recorder"

    def __init__(self, trainer_box):
        self.box, self.calls = trainer_box, []

    def __call__(self, prompts, completions, completion_ids, policy_version, env_reward, **kwargs):
        step = self.box[0].state.global_step
        self.calls.append((step, list(prompts), [list(ids) for ids in completion_ids], list(policy_version)))
        return [float(sum(ids) % 7) for ids in completion_ids]  # varies within a group: the weights do change


class StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        control.should_training_stop = state.global_step >= self.step


def train(
    model,
    tokenizer,
    tmp_path,
    *,
    max_staleness,
    steps=3,
    generator=None,
    trainer_class=TurnLevelGRPOTrainer,
    callbacks=(),
    resume=None,
    **config,
):
    box: list = []
    recorder = Recorder(box)
    rollout_func = make_rollout_func(
        Counting, max_turns=3, max_turn_tokens=6, max_staleness=max_staleness, generator=generator
    )
    trainer = make_trainer(
        copy.deepcopy(model),
        tokenizer,
        rollout_func,
        tmp_path,
        reward_funcs=[recorder],
        steps=steps,
        trainer_class=trainer_class,
        trainer_kwargs={"advantage_mode": "episode"} if trainer_class is TurnLevelGRPOTrainer else {},
        callbacks=callbacks,
        learning_rate=1e-2,
        **config,
    )
    box.append(trainer)
    trainer.train(resume_from_checkpoint=resume)
    return trainer, recorder.calls


def test_staleness_one_trains_the_same_batches_as_staleness_zero(qwen3_tokenizer, tiny_qwen3, tmp_path):
    """With a generator whose tokens depend only on the context, pipelining changes when episodes are played,
    never which prompts a step trains on or their tokens."""
    turn_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    runs = {}
    for staleness in (0, 1):
        generator = ContextHashGenerator(range(1000, 1100), stop_id=turn_end, stop_prob=0.3)
        _, runs[staleness] = train(
            tiny_qwen3, qwen3_tokenizer, tmp_path / str(staleness), max_staleness=staleness, generator=generator
        )
    assert [(c[1], c[2]) for c in runs[0]] == [(c[1], c[2]) for c in runs[1]]
    assert [c[3] for c in runs[0]] == [[step] * 4 for step in range(3)]  # on-policy: sampled by the step's policy
    assert [c[3] for c in runs[1]] == [[0] * 4, [0] * 4, [1] * 4]  # one step ahead once the pipeline runs


def test_pipelined_training_samples_with_the_published_policy(qwen3_tokenizer, tiny_qwen3, tmp_path):
    trainer, calls = train(tiny_qwen3, qwen3_tokenizer, tmp_path, max_staleness=1, steps=4)
    staleness = [step - versions[0] for step, _, _, versions in calls]
    assert staleness == [0, 1, 1, 1]
    logs = [h for h in trainer.state.log_history if "pipeline/staleness" in h]
    assert [h["pipeline/staleness"] for h in logs] == staleness
    for key in ("sampling/importance_sampling_ratio/mean", "sampling/is_clipped_fraction"):
        assert all(key in h for h in logs)
    assert all("pipeline/generator_busy_fraction" in h for h in logs[1:])
    # the snapshot followed the trainer: it was refreshed from the published weights, which training changed
    pipeline = next(cb.pipeline for cb in trainer.callback_handler.callbacks if isinstance(cb, PublishPolicy))
    assert pipeline.snapshot.version >= 2
    name = next(n for n, p in tiny_qwen3.named_parameters() if p.requires_grad)
    assert not pipeline.snapshot.model.get_parameter(name).equal(tiny_qwen3.get_parameter(name))


def test_a_trainer_that_cannot_correct_the_loss_is_refused(qwen3_tokenizer, tiny_qwen3, tmp_path):
    with pytest.raises(ConfigError, match="TurnLevelGRPOTrainer"):
        train(tiny_qwen3, qwen3_tokenizer, tmp_path, max_staleness=1, steps=1, trainer_class=GRPOTrainer)


def test_max_staleness_must_be_a_whole_number():
    with pytest.raises(ConfigError, match="max_staleness"):
        make_rollout_func(Counting, max_staleness=-1)
    with pytest.raises(ConfigError, match="max_staleness"):
        make_rollout_func(Counting, max_staleness=1.5)


def _sigint_as_in_a_terminal() -> None:
    """In the child before exec: SIGINT back to its default, so Python turns it into KeyboardInterrupt. A test
    run started in the background by a non-interactive shell (`cmd &`) inherits SIGINT *ignored*; its child would
    then train on through the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_pipelined_training_promptly(tmp_path, qwen3_tokenizer):
    """SIGINT while the background plays a rollout (its env calls take 2 s): the process exits within seconds."""
    script = Path(__file__).parent / "pipelined_script.py"
    env = dict(os.environ, TRL_EXPERIMENTAL_SILENCE="1", HF_HUB_OFFLINE="1")
    run = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_sigint_as_in_a_terminal,
    )
    deadline = time.monotonic() + 180
    try:
        while not (tmp_path / "step-1").exists():
            assert run.poll() is None, run.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "no step within the time limit"
            time.sleep(0.2)
        time.sleep(1.0)  # the background is inside the next batches' env calls
        interrupted = time.monotonic()
        run.send_signal(signal.SIGINT)
        run.wait(timeout=30)
        took = time.monotonic() - interrupted
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode != 0 and "KeyboardInterrupt" in run.stderr.read()
    assert took < 15, f"the process took {took:.1f} s to exit after Ctrl-C"


def test_a_resumed_run_restarts_the_pipeline_on_the_prompts_trl_resumes_with(qwen3_tokenizer, tiny_qwen3, tmp_path):
    """The twin dataloader starts from the beginning; TRL resumes mid-epoch: the pipeline re-aligns on TRL's prompts."""
    turn_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")

    def generator():
        return ContextHashGenerator(range(1000, 1100), stop_id=turn_end, stop_prob=0.3)

    _, reference = train(tiny_qwen3, qwen3_tokenizer, tmp_path / "ref", max_staleness=1, steps=4, generator=generator())
    first = tmp_path / "first"
    train(
        tiny_qwen3,
        qwen3_tokenizer,
        first,
        max_staleness=1,
        steps=4,
        generator=generator(),
        callbacks=[StopAt(2)],
        save_strategy="steps",
        save_steps=1,
    )
    trainer, resumed = train(
        tiny_qwen3,
        qwen3_tokenizer,
        first,
        max_staleness=1,
        steps=4,
        generator=generator(),
        resume=str(first / "checkpoint-2"),
    )
    assert [(c[0], c[1], c[2]) for c in resumed] == [(c[0], c[1], c[2]) for c in reference[2:]]
    assert all(0 <= step - versions[0] <= 1 for step, _, _, versions in resumed)
    replayed = [h["pipeline/replayed"] for h in trainer.state.log_history if "pipeline/replayed" in h]
    assert replayed[-1] == 1  # the first batch after the resume, once; then it looks ahead again


def test_a_second_train_call_starts_a_new_pipeline(qwen3_tokenizer, tiny_qwen3, tmp_path):
    trainer, calls = train(tiny_qwen3, qwen3_tokenizer, tmp_path, max_staleness=1, steps=2)
    trainer.args.max_steps = 3
    first = next(cb.pipeline for cb in trainer.callback_handler.callbacks if isinstance(cb, PublishPolicy))
    trainer.train(resume_from_checkpoint=None)  # the first run's pipeline was closed when it ended
    pipelines = [cb.pipeline for cb in trainer.callback_handler.callbacks if isinstance(cb, PublishPolicy)]
    assert first.closed and len(pipelines) == 1 and pipelines[0] is not first and pipelines[0].closed
    assert len(calls) == 2 + 3 and all(0 <= step - versions[0] <= 1 for step, _, _, versions in calls)
