"""ChatTemplateProcessor: chunks derived from every TRL template; refusals; parsing."""

import pytest
from processor_cases import CHUNKABLE, PRESET_TEMPLATES, UNCHUNKABLE

from trl_env import ChatTemplateProcessor, preset
from trl_env.chat.template_processor import ChunkingError
from trl_env.testing.template_tokenizers import LLAMA3

# the last user turn is left open: templates may render the final answer differently (Qwen3 adds an
# empty think block to it), but every earlier turn must match what trl-env builds
CONVERSATION = [("Guess a number.", "8"), ("Higher than 8.", "12"), ("Lower than 12.", None)]


def _messages(template_text: str, system: str, turns, parts: bool):
    def content(text):
        return [{"type": "text", "text": text}] if parts else text

    messages = [{"role": "system", "content": content(system)}] if system else []
    for user, assistant in turns:
        messages.append({"role": "user", "content": content(user)})
        if assistant is not None:
            messages.append({"role": "assistant", "content": content(assistant)})
    return messages


def _joined(processor, system: str, turns) -> str:
    """The text trl-env builds for a conversation: prompt, answers with turn ends, env chunks."""
    chunks = processor.chunks
    text = processor.init_system_input(system)
    for i, (user, assistant) in enumerate(turns):
        if i:
            text += chunks.after_turn_end
        text += processor.append_user_input(user)
        if assistant is not None:
            text += assistant + chunks.turn_end
    return text


@pytest.mark.parametrize("name", CHUNKABLE)
def test_chunks_join_to_the_template_rendering(template_tokenizers, name):
    tokenizer = template_tokenizers(name)
    processor = ChatTemplateProcessor(tokenizer)
    system = "You are a careful player." if processor.chunks.has_system_role else ""
    parts = name in ("smolvlm", "idefics3")
    answer_prefix = " " if parts else ""  # SmolVLM's template puts a space after "Assistant:"; the model writes it
    turns = [(u, None if a is None else answer_prefix + a) for u, a in CONVERSATION]
    expected = tokenizer.apply_chat_template(
        _messages(tokenizer.chat_template, system, CONVERSATION, parts), tokenize=False, add_generation_prompt=True
    )
    assert _joined(processor, system, turns) == expected


@pytest.mark.parametrize("name", CHUNKABLE)
def test_generation_prompt_matches_template(template_tokenizers, name):
    tokenizer = template_tokenizers(name)
    processor = ChatTemplateProcessor(tokenizer)
    parts = name in ("smolvlm", "idefics3")
    messages = _messages(tokenizer.chat_template, "", [("Hi there", "")], parts)[:1]
    expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert processor.init_system_input("") + processor.append_user_input("Hi there") == expected


@pytest.mark.parametrize("name", UNCHUNKABLE)
def test_unchunkable_templates_are_refused_with_a_pointer_to_presets(template_tokenizers, name):
    with pytest.raises(ChunkingError, match="not re-rendered in the history.*preset"):
        ChatTemplateProcessor(template_tokenizers(name))


def test_qwen3_thinking_switch(template_tokenizers):
    tokenizer = template_tokenizers("qwen3")
    assert ChatTemplateProcessor(tokenizer, thinking=True).chunks.user_suffix.endswith("assistant\n")
    with pytest.raises(ChunkingError, match="qwen3_nothink"):
        ChatTemplateProcessor(tokenizer, thinking=False)


def test_thinking_on_a_template_without_switch_is_an_error(template_tokenizers):
    with pytest.raises(ValueError, match="enable_thinking"):
        ChatTemplateProcessor(template_tokenizers("llama3_2"), thinking=True)


def test_system_prompt_on_a_template_without_system_role(template_tokenizers):
    processor = ChatTemplateProcessor(template_tokenizers("gemma3"))
    assert processor.init_system_input("") == "<bos>"
    with pytest.raises(ValueError, match="no system role"):
        processor.init_system_input("Be brief.")


def test_template_that_strips_content_is_mirrored(template_tokenizers):
    processor = ChatTemplateProcessor(template_tokenizers("llama3_2"))
    assert processor.chunks.strips_content
    assert "\n\n  hi \n<|eot_id|>" not in processor.append_user_input("  hi \n")


@pytest.mark.parametrize("name", sorted(PRESET_TEMPLATES))
def test_presets_match_their_family_template(template_tokenizers, name):
    template, kwargs = PRESET_TEMPLATES[name]
    tokenizer = template_tokenizers(template)
    processor = preset(name)
    first = tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        tokenize=False,
        add_generation_prompt=True,
        **kwargs,
    )
    assert processor.init_system_input("Be brief.") + processor.append_user_input("Hi") == first
    history = tokenizer.apply_chat_template(
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Yo"},
            {"role": "user", "content": "Again"},
        ],
        tokenize=False,
        add_generation_prompt=True,
        **kwargs,
    )
    # the turn boundary (end of turn, what follows it, the next user chunk) is the template's own
    boundary = processor.chunks.turn_end + processor.chunks.after_turn_end + processor.append_user_input("Again")
    assert history.endswith("Yo" + boundary)


def test_parse_with_response_template_keeps_tool_calls(qwen3_tokenizer):
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    reasoning, action = processor.parse_agent_output(
        '<think>\nuse the tool\n</think>\n\n<tool_call>\n{"name": "guess", "arguments": {"n": 7}}\n</tool_call>'
    )
    assert reasoning == "use the tool"
    assert action == '<tool_call>{"name": "guess", "arguments": {"n": 7}}</tool_call>'


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("<think>plan</think>\n\n42", ("plan", "42", True)),
        ("42", ("", "42", True)),
        ("<think>never closed", ("never closed", "", False)),
        ("", ("", "", True)),
    ],
)
def test_parse_qwen3(qwen3_tokenizer, completion, expected):
    assert tuple(ChatTemplateProcessor(qwen3_tokenizer).parse(completion)) == expected


def test_parse_falls_back_to_markers_without_response_template(template_tokenizers):
    processor = preset("deepseek_r1")  # generation prompt opens <think>
    assert processor.parse("weigh options</think>\n\n7") == ("weigh options", "7", True)
    assert processor.parse("still thinking") == ("still thinking", "", False)


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="qwen3_nothink"):
        preset("nope")


def test_template_tokenizers_equal_a_full_deep_copy(qwen3_tokenizer, template_tokenizers):
    """The family tokenizers share Qwen3's BPE model to skip re-parsing it: the result must be what a full
    deep copy given the same tokens serializes to, and the shared original must stay unchanged."""
    import copy

    from tokenizers import AddedToken

    before = qwen3_tokenizer.backend_tokenizer.to_str()
    tokenizer = template_tokenizers("llama3")
    full = copy.deepcopy(qwen3_tokenizer)
    full.add_tokens([AddedToken(t, special=True, normalized=False) for t in LLAMA3], special_tokens=True)
    assert tokenizer.backend_tokenizer.to_str() == full.backend_tokenizer.to_str()
    text = "<|begin_of_text|>hi<|eot_id|> there<|im_end|>"
    assert tokenizer(text)["input_ids"] == full(text)["input_ids"]
    assert qwen3_tokenizer.backend_tokenizer.to_str() == before
    assert "<|eot_id|>" not in qwen3_tokenizer.get_vocab()
