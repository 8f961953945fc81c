"""history='template'/'window': every turn sample's prompt is the real template's tokens, its completion the
sampled ids, for templates that rewrite history (Qwen3 and Qwen3.5 thinking, DeepSeek-R1 distill), with tools."""

from __future__ import annotations

import pytest

from tests.history.envs import Lookup, Talk
from tests.history.scripted import TurnScript
from trl_env import rollout
from trl_env.chat.template_processor import ChatTemplateProcessor, ChunkingError
from trl_env.episode import StopReason

THINKING = {  # template -> (end-of-turn token, answers written after its generation prompt)
    "qwen3": ("<|im_end|>", ["<think>\nTurn one: say 1.\n</think>\n\n1", "<think>\nNow two.\n</think>\n\n2", "3"]),
    "qwen3_5_think": (
        "<|im_end|>",
        ["Turn one: say 1.\n</think>\n\n1", "Now two.\n</think>\n\n2", "Three.\n</think>\n\n3"],
    ),
    "deepseek_r1_distill": (
        "<｜end▁of▁sentence｜>",
        ["Turn one: say 1.\n</think>\n\n1", "Now two.\n</think>\n\n2", "Three.\n</think>\n\n3"],
    ),
}
TOOLS = {
    "qwen3": [
        '<think>\nLook it up.\n</think>\n\n<tool_call>\n{"name": "lookup", "arguments": {"key": "a"}}\n</tool_call>',
        '<think>\nAgain.\n</think>\n\nChecking.\n<tool_call>\n{"name": "lookup", "arguments": {"key": "b"}}\n'
        "</tool_call>",
        "<think>\nDone.\n</think>\n\nThe value is known.",
    ],
    "qwen3_5_think": [
        "Look it up.\n</think>\n\n<tool_call>\n<function=lookup>\n<parameter=key>\na\n</parameter>\n</function>\n"
        "</tool_call>",
        "Again.\n</think>\n\n<tool_call>\n<function=lookup>\n<parameter=key>\nb\n</parameter>\n</function>\n</tool_call>",
        "Done.\n</think>\n\nThe value is known.",
    ],
}


def _tokenizer(name, qwen3_tokenizer, template_tokenizers):
    return qwen3_tokenizer if name == "qwen3" else template_tokenizers(name)


def _check_samples(episodes, tokenizer, script):
    for episode in episodes:
        episode.check(tokenizer)
        assert len(episode.turn_samples) == episode.num_turns
        for sample in episode.turn_samples:
            messages = [episode.messages[i] for i in sample.message_indices]
            expected = tokenizer.apply_chat_template(
                messages, tools=episode.tools or None, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            assert sample.prompt_ids == list(expected)  # token for token
            assert sample.completion_ids == script.ids[sample.turn % len(script.ids)]  # sampled ids verbatim
            assert sample.env_mask == [1] * len(sample.completion_ids)
            assert messages[-1]["role"] in ("user", "tool")
        # the generator was asked exactly the turn samples' prompts
        assert all(sample.prompt_ids in script.contexts for sample in episode.turn_samples)


@pytest.mark.parametrize("name", list(THINKING))
@pytest.mark.parametrize("history", ["template", "window"])
def test_thinking_prompts_are_the_templates(name, history, qwen3_tokenizer, template_tokenizers):
    tokenizer = _tokenizer(name, qwen3_tokenizer, template_tokenizers)
    end, texts = THINKING[name]
    script = TurnScript(tokenizer, texts, end)
    processor = ChatTemplateProcessor(tokenizer, per_turn=True)
    episodes = rollout(
        Talk, ["a", "b"], script, processor, tokenizer=tokenizer, history=history, history_window=1,
        system_prompt="Play.", max_turns=3, schedule="turn", env_isolation="thread",
    )  # fmt: skip
    _check_samples(episodes, tokenizer, script)
    episode = episodes[0]
    assert episode.stop_reason == StopReason.DONE and episode.num_turns == 3
    # the conversation is what the env and the model said, independently rebuilt
    assert episode.messages == [
        {"role": "system", "content": "Play."},
        {"role": "user", "content": "Start of game a. Say a number."},
        {"role": "assistant", "content": texts[0]},
        {"role": "user", "content": f"Turn 1 seen: {episode.turns[0].action[:20]!r}. Next."},
        {"role": "assistant", "content": texts[1]},
        {"role": "user", "content": f"Turn 2 seen: {episode.turns[1].action[:20]!r}. Next."},
        {"role": "assistant", "content": texts[2]},
    ]
    last = tokenizer.decode(episode.turn_samples[-1].prompt_ids)
    assert "Turn one" not in last  # old thinking dropped, as the template drops it
    if history == "window":  # opening + the last turn only
        assert episode.turn_samples[2].message_indices == [0, 1, 4, 5]
        assert "Turn 1 seen" not in last and "Turn 2 seen" in last
    else:
        assert episode.turn_samples[2].message_indices == list(range(6))


@pytest.mark.parametrize("name", list(TOOLS))
def test_tool_call_prompts_are_the_templates(name, qwen3_tokenizer, template_tokenizers):
    tokenizer = _tokenizer(name, qwen3_tokenizer, template_tokenizers)
    script = TurnScript(tokenizer, TOOLS[name], "<|im_end|>")
    processor = ChatTemplateProcessor(tokenizer, per_turn=True)
    episodes = rollout(
        Lookup, ["k1"], script, processor, tokenizer=tokenizer, history="template", max_turns=3, schedule="turn",
        env_isolation="thread",
    )  # fmt: skip
    _check_samples(episodes, tokenizer, script)
    episode = episodes[0]
    assert [m["role"] for m in episode.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert episode.messages[2] == {"role": "tool", "name": "lookup", "content": "value of a"}
    assert episode.reward == 2.0 and episode.tools[0]["function"]["name"] == "lookup"
    assert "<tool_response>\nvalue of b\n</tool_response>" in tokenizer.decode(episode.turn_samples[2].prompt_ids)


def test_refused_templates_need_no_preset(template_tokenizers):
    tokenizer = template_tokenizers("deepseek_r1_distill")
    with pytest.raises(ChunkingError):
        ChatTemplateProcessor(tokenizer)
    assert ChatTemplateProcessor(tokenizer, per_turn=True).turn_end == "<｜end▁of▁sentence｜>"


def test_records_show_each_turns_own_prompt(qwen3_tokenizer):
    from trl_env.viewer.records import episode_record

    end, texts = THINKING["qwen3"]
    script = TurnScript(qwen3_tokenizer, texts, end)
    processor = ChatTemplateProcessor(qwen3_tokenizer, per_turn=True)
    (episode,) = rollout(
        Talk, ["a"], script, processor, tokenizer=qwen3_tokenizer, history="window", history_window=1,
        max_turns=3, schedule="turn", env_isolation="thread",
    )  # fmt: skip
    record = episode_record(episode, qwen3_tokenizer)
    shown = [sample["prompt_text"] for sample in record["turn_samples"]]
    assert shown == [qwen3_tokenizer.decode(sample.prompt_ids) for sample in episode.turn_samples]
    transcript = episode.transcript()
    assert [len(s["messages"]) for s in transcript["turn_samples"]] == [1, 3, 3]  # the window: opening + 1 turn
    assert transcript["text"].endswith("3<|im_end|>\n")  # the conversation as the template renders it


@pytest.mark.parametrize("history", ["template", "window"])
def test_kv_reuse_where_prefixes_match_is_exact_and_released(history, qwen3_tokenizer, tiny_qwen3):
    import torch

    from tests.history.envs import LongCorridor
    from trl_env.generation.kv_cache import EpisodeCacheGenerator

    end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[end])
    processor = ChatTemplateProcessor(qwen3_tokenizer, per_turn=True)
    episodes = rollout(
        LongCorridor, ["a", "a"], generator, processor, tokenizer=qwen3_tokenizer, history=history,
        history_window=2, max_turns=6, max_turn_tokens=3, env_isolation="thread",
    )  # fmt: skip
    assert generator.stats.reuse_rate > 0.3  # the opening (and, for 'template', the rendered history) is reused
    assert len(generator) == 0  # every episode's entries are dropped when it no longer needs them
    sample = episodes[0].turn_samples[-1]
    ids = torch.tensor([sample.prompt_ids + sample.completion_ids])
    with torch.no_grad():
        logits = tiny_qwen3(ids).logits[0, len(sample.prompt_ids) - 1 : -1].float()
    fresh = torch.log_softmax(logits, -1).gather(1, ids[0, len(sample.prompt_ids) :, None])[:, 0]
    trained = [i for i, m in enumerate(sample.env_mask) if m]
    assert torch.allclose(fresh[trained], torch.tensor(sample.logprobs)[trained], atol=1e-4)


def test_every_trl_template_renders_exact_per_turn_prompts(qwen3_tokenizer, template_tokenizers):
    """history='template' needs no preset: every TRL template of trl_env.testing, with no system role where none."""
    from trl_env.engine.history import TemplateHistory
    from trl_env.testing.template_tokenizers import FAMILIES

    for name in FAMILIES:
        tokenizer = template_tokenizers(name)
        processor = ChatTemplateProcessor(tokenizer, per_turn=True)
        script = TurnScript(tokenizer, ["1", "2 and 3"], processor.turn_end)
        system = "" if name in ("gemma", "gemma3") else "Play."
        (episode,) = rollout(
            Talk, ["a"], script, processor, tokenizer=tokenizer, history="template", system_prompt=system,
            max_turns=3, schedule="turn", env_isolation="thread",
        )  # fmt: skip
        history = TemplateHistory(tokenizer, window=None)
        for sample in episode.turn_samples:
            messages = history.template_messages([episode.messages[i] for i in sample.message_indices])
            expected = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            assert sample.prompt_ids == list(expected), name
        assert "Turn 2 seen" in tokenizer.decode(episode.turn_samples[2].prompt_ids), name  # env text is rendered


@pytest.mark.parametrize("history", ["template", "window"])
def test_an_answer_prefix_ends_every_prompt_and_opens_every_assistant_message(history, qwen3_tokenizer):
    from trl_env.chat.chunked_processor import with_answer_prefix

    script = TurnScript(qwen3_tokenizer, [" 4", " 6", " 5"], "<|im_end|>")
    processor = with_answer_prefix(ChatTemplateProcessor(qwen3_tokenizer, per_turn=True), "My guess:")
    episodes = rollout(
        Talk, ["a", "b"], script, processor, tokenizer=qwen3_tokenizer, history=history, history_window=1,
        max_turns=3, schedule="turn", env_isolation="thread",
    )  # fmt: skip
    prefix = qwen3_tokenizer.encode("My guess:", add_special_tokens=False)
    for episode in episodes:
        said = [m["content"] for m in episode.messages if m["role"] == "assistant"]
        assert said == ["My guess: 4", "My guess: 6", "My guess: 5"]  # the prefix is part of what the model said
        for sample in episode.turn_samples:
            messages = [episode.messages[i] for i in sample.message_indices]
            template = qwen3_tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, tokenize=True, return_dict=False
            )
            assert sample.prompt_ids == list(template) + prefix  # the template's prompt, then the prefix
            assert sample.prompt_ids in script.contexts  # what the model was asked to continue
        assert [turn.action for turn in episode.turns] == ["4", "6", "5"]  # parsed after the prefix
