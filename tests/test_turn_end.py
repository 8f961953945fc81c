"""The end of a model turn has one owner: a processor that cannot say it is refused up front, by name."""

from __future__ import annotations

import pytest

from examples.guess_number import GuessNumberEnv
from trl_env import ChatTemplateProcessor, make_rollout_func, preset, rollout
from trl_env.chat.turn_end import TurnEnd
from trl_env.checks.template import template_differences
from trl_env.generation.local_model import stop_token_ids
from trl_env.testing import InstantGenerator

IM_END, ENDOFTEXT = 151645, 151643


class HalfDelimited:
    """A processor that names its end-of-turn token but not what the template writes after it."""

    turn_end = "<|im_end|>"

    def init_system_input(self, prompt):
        return f"<|im_start|>system\n{prompt}<|im_end|>\n"

    def append_user_input(self, prompt):
        return f"<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"

    def parse_agent_output(self, completion):
        return "", completion


class NoEnvWanted:
    """An env factory that must never run: the processor is refused first."""

    def __init__(self):
        raise AssertionError("an env was built before the processor was refused")


@pytest.mark.parametrize(
    "build",
    [
        lambda tok: rollout(NoEnvWanted, ["a"], InstantGenerator([5], stop_id=IM_END), HalfDelimited(), tokenizer=tok),
        lambda tok: make_rollout_func(NoEnvWanted, HalfDelimited()),
        lambda tok: template_differences(tok, HalfDelimited()),
        lambda tok: stop_token_ids(None, tok, HalfDelimited()),
    ],
    ids=["rollout", "make_rollout_func", "template_check", "stop_token_ids"],
)
def test_a_processor_without_its_turn_end_is_refused_at_construction_naming_what_it_lacks(qwen3_tokenizer, build):
    with pytest.raises(TypeError) as refused:
        build(qwen3_tokenizer)
    message = str(refused.value)
    assert message.startswith("HalfDelimited cannot say how a model turn ends: it lacks after_turn_end.")
    assert "turn_end," not in message.split(".")[0]  # the member it has is not named as missing


def test_turn_end_reads_the_processor_once_for_encoder_and_stop_ids(qwen3_tokenizer, tiny_qwen3):
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    ending = TurnEnd.of(processor, qwen3_tokenizer)
    assert (ending.text, ending.after, ending.id) == ("<|im_end|>", "\n", IM_END)
    # the model's EOS ids come first, in their order, then the end-of-turn token; no duplicates
    assert ending.stop_token_ids([ENDOFTEXT, IM_END]) == [ENDOFTEXT, IM_END]
    assert ending.stop_token_ids(ENDOFTEXT) == [ENDOFTEXT, IM_END]
    assert ending.stop_token_ids(None) == [IM_END]
    assert stop_token_ids(tiny_qwen3, qwen3_tokenizer, preset("qwen3_thinking")) == [IM_END]


def test_an_end_of_turn_text_of_several_tokens_is_refused(qwen3_tokenizer):
    class Wordy(HalfDelimited):
        turn_end, after_turn_end = "END OF TURN", "\n"

    with pytest.raises(ValueError, match="'END OF TURN' is 3 tokens, expected one special token"):
        TurnEnd.of(Wordy(), qwen3_tokenizer)


def test_a_turn_stopped_at_another_eos_is_closed_by_the_engine(qwen3_tokenizer):
    """The generator stops at every stop id; the engine's one cut keeps it and appends the end-of-turn token."""
    episodes = rollout(
        GuessNumberEnv,
        ["3"],
        InstantGenerator([5, 6], stop_id=ENDOFTEXT, stop_prob=0.5, seed=1),
        ChatTemplateProcessor(qwen3_tokenizer),
        tokenizer=qwen3_tokenizer,
        max_turns=3,
        max_turn_tokens=8,
        env_isolation="thread",
    )
    episode = episodes[0]
    stopped = [i for i, token in enumerate(episode.completion_ids) if token == ENDOFTEXT]
    assert stopped, "the case needs a turn that stopped at the other EOS token"
    for i in stopped:
        assert episode.env_mask[i] == 1 and episode.completion_ids[i + 1] == IM_END and episode.env_mask[i + 1] == 0
    episode.check(qwen3_tokenizer)
