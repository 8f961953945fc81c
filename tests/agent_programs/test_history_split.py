"""An openai-SDK agent that summarises its history mid-episode: ``on_history_rewrite="split"`` trains it as new
samples rendered from its new messages (``history="template"``), ``"fail"`` fails it naming the difference."""

from __future__ import annotations

import torch

from examples.agent_calculator import TOOLS
from tests.agent_programs.conftest import MULTIPLY
from tests.grpo_helpers import make_trainer
from trl_env import ChatTemplateProcessor, make_rollout_func, rollout
from trl_env.agents import agent_env
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer

SUMMARISES = "tests.agent_programs.programs:summarises"
TASK = "What is 6 * 7 + 1?"


def run(generator, tokenizer, factory, **settings):
    settings = {"max_turns": 6, "max_turn_tokens": 40, "env_isolation": "process", **settings}
    with torch.no_grad():
        return rollout(factory, [TASK], generator, ChatTemplateProcessor(tokenizer), **settings)


def _ids(tokenizer, messages, **kwargs):
    return tokenizer.apply_chat_template(
        messages, tools=TOOLS, tokenize=True, add_generation_prompt=True, return_dict=False, **kwargs
    )


def test_split_starts_a_new_sample_from_the_rewritten_messages(qwen3_tokenizer, scripted_generator):
    _, generator = scripted_generator(MULTIPLY)
    (episode,) = run(generator, qwen3_tokenizer, agent_env(SUMMARISES, on_history_rewrite="split"), history="template")
    episode.check(qwen3_tokenizer)  # every turn sample's mask-1 ids are its turn's sampled ids
    assert episode.error is None and episode.reward == 0.0 and episode.num_turns == 4
    assert episode.metrics["agent_history_rewrites"] == 1.0
    samples = episode.turn_samples
    turn_ids = qwen3_tokenizer.encode(MULTIPLY) + [qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")]
    assert [s.completion_ids for s in samples] == [turn_ids] * 4  # the sampled ids, verbatim
    # after the rewrite, the prompt is the template's rendering of the agent's new messages, tools included
    summary = f"Summary so far: multiply(6, 7) returned 42 twice. Task: {TASK}"
    rewritten = [
        {"role": "system", "content": "You resume a summarised task."},
        {"role": "user", "content": summary},
    ]
    assert samples[2].prompt_ids == _ids(qwen3_tokenizer, rewritten)
    # the turn after extends the new conversation with the model's text and the tool result, as history="template"
    extended = [
        *rewritten, {"role": "assistant", "content": MULTIPLY}, {"role": "tool", "name": "multiply", "content": "42"}
    ]  # fmt: skip
    assert samples[3].prompt_ids == _ids(qwen3_tokenizer, extended)
    # before it, the first conversation: the first turn's prompt is the agent's first request
    user = {"role": "user", "content": TASK}
    assert samples[0].prompt_ids == episode.prompt_ids == _ids(qwen3_tokenizer, [user])
    # the transcript shows the rewrite and why
    (record,) = episode.transcript()["history_rewrites"]
    assert record["turn"] == 2 and "message 0 differs at character" in record["reason"]
    assert "[history rewritten before turn 2: the agent's request does not extend its conversation" in episode.text
    shown = episode.transcript()["turn_samples"][2]["messages"]
    assert [m["content"] for m in shown] == [r["content"] for r in rewritten]


def test_fail_names_the_first_difference(qwen3_tokenizer, scripted_generator):
    _, generator = scripted_generator(MULTIPLY)
    for history in ("full", "template"):
        (episode,) = run(generator, qwen3_tokenizer, agent_env(SUMMARISES), history=history)
        assert episode.stop_reason == "env_error" and episode.num_turns == 2
        assert "HistoryError: the agent's request does not extend its conversation: message 0 differs at character" in (
            episode.error
        )
        assert 'got {"role": "system", "content": "You resume a summarised task."}' in episode.error


def test_split_under_history_full_fails_saying_what_it_needs(qwen3_tokenizer, scripted_generator):
    _, generator = scripted_generator(MULTIPLY)
    (episode,) = run(generator, qwen3_tokenizer, agent_env(SUMMARISES, on_history_rewrite="split"), history="full")
    assert episode.stop_reason == "env_error" and episode.num_turns == 2
    assert "message 0 differs" in episode.error
    assert "needs RolloutConfig.history='template' or 'window'" in episode.error


def test_grpo_trains_the_split_samples(qwen3_tokenizer, scripted_generator, tmp_path):
    model, _ = scripted_generator(MULTIPLY)
    factory = agent_env(SUMMARISES, on_history_rewrite="split")
    rollout_func = make_rollout_func(
        factory, history="template", max_turns=6, max_turn_tokens=40, env_isolation="thread"
    )
    seen = []
    trainer = make_trainer(
        model, qwen3_tokenizer, rollout_func, tmp_path, steps=1, prompts=[TASK] * 2,
        trainer_class=TurnLevelGRPOTrainer, trainer_kwargs={"advantage_mode": "episode"}, max_completion_length=256,
        per_device_train_batch_size=2, num_generations=2,
    )  # fmt: skip
    compute_loss = trainer._compute_loss

    def spy(model, inputs):
        seen.append(inputs["prompt_ids"].shape[0])
        return compute_loss(model, inputs)

    trainer._compute_loss = spy
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    (log,) = [log for log in trainer.state.log_history if "reward" in log]
    assert log["env/errors"] == 0.0 and log["reward"] == 0.5  # rewards 0 and 1 (the agents share a process)
    assert seen == [8]  # 2 episodes, 4 turn samples each (2 before the rewrite, 2 after)
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
