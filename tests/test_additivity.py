"""Additivity: every supported processor passes; the known failure cases are found."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from processor_cases import CHUNKABLE, NON_ADDITIVE, PRESET_TEMPLATES

from trl_env import ChatTemplateProcessor, check_additivity, preset
from trl_env.checks.additivity import Piece, compare_pieces


def _processors(template_tokenizers):
    for name in CHUNKABLE:
        if name not in NON_ADDITIVE:
            tokenizer = template_tokenizers(name)
            yield name, tokenizer, ChatTemplateProcessor(tokenizer)
    for name, (template, _) in PRESET_TEMPLATES.items():
        yield name, template_tokenizers(template), preset(name)


@pytest.fixture(scope="module")
def processors(template_tokenizers):
    return list(_processors(template_tokenizers))


def test_every_supported_processor_is_additive(processors):
    failed = {name: check_additivity(tok, proc).table(3) for name, tok, proc in processors}
    failed = {name: table for name, table in failed.items() if "NOT additive" in table}
    assert not failed, "\n\n".join(failed.values())


@pytest.mark.parametrize("name", sorted(NON_ADDITIVE))
def test_plain_text_generation_prompt_followed_by_newline_is_found(template_tokenizers, name):
    tokenizer = template_tokenizers(name)
    report = check_additivity(tokenizer, ChatTemplateProcessor(tokenizer))
    assert not report.ok
    newline_led = [f for f in report.failures if f.boundary.startswith("prompt | model") and ":\n" in f.context]
    assert newline_led, report.table()
    assert any(token.startswith(":") and token.endswith("Ċ") for token in newline_led[0].whole)


def test_stripped_stop_token_before_newline_led_chunk_is_found(qwen3_tokenizer):
    # a model turn whose stop token was stripped, followed by Qwen3's "\n<|im_start|>user..." chunk
    def piece(kind, text):
        return Piece(kind, text, qwen3_tokenizer.encode(text, add_special_tokens=False))

    failure = compare_pieces(
        qwen3_tokenizer, "stripped", [piece("model", "Done."), piece("env", "\n<|im_start|>user\nok<|im_end|>")]
    )
    assert failure is not None
    assert failure.boundary == "model | env"
    assert ".Ċ" in failure.whole and ".Ċ" not in failure.chunked


def test_report_table_names_the_failing_boundary(template_tokenizers):
    tokenizer = template_tokenizers("smolvlm")
    table = check_additivity(tokenizer, ChatTemplateProcessor(tokenizer)).table()
    assert "NOT additive" in table and "prompt | model" in table


TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=0, max_size=40
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(deltas=st.lists(TEXT, min_size=2, max_size=3), outputs=st.lists(TEXT, min_size=1, max_size=3))
def test_random_texts_are_additive_for_qwen3(qwen3_tokenizer, deltas, outputs):
    # env text that spells a special token is deliberately tokenized as plain text; skip those
    specials = ("<|", "|>")
    deltas = [d for d in deltas if not any(s in d for s in specials)] or ["x", "y"]
    outputs = [o for o in outputs if "<|" not in o and "<" not in o] or ["z"]
    for processor in (ChatTemplateProcessor(qwen3_tokenizer), preset("qwen3_nothink")):
        # the tool cases do not depend on these texts: test_every_supported_processor_is_additive runs them
        report = check_additivity(qwen3_tokenizer, processor, deltas=deltas, outputs=outputs, tool_turns=False)
        assert report.ok, report.table(3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(deltas=st.lists(TEXT, min_size=2, max_size=3), outputs=st.lists(TEXT, min_size=1, max_size=2))
def test_random_texts_are_additive_for_every_processor(processors, deltas, outputs):
    deltas = [d for d in deltas if "<" not in d] or ["x", "y"]
    outputs = [o for o in outputs if "<" not in o] or ["z"]
    for name, tokenizer, processor in processors:
        report = check_additivity(
            tokenizer, processor, system_prompts=[""], deltas=deltas, outputs=outputs, tool_turns=False
        )
        assert report.ok, f"{name}\n{report.table(3)}"


def test_an_answer_prefix_is_an_allowed_departure_from_the_template(qwen3_tokenizer):
    import dataclasses

    from trl_env.chat.chunked_processor import ChunkedProcessor, with_answer_prefix
    from trl_env.checks.template import template_differences

    prefixed = with_answer_prefix(ChatTemplateProcessor(qwen3_tokenizer), "My guess:")
    assert template_differences(qwen3_tokenizer, prefixed) == []  # what the demo and `--answer-prefix` rely on
    # the same chunks without declaring the prefix: a real difference from the template, reported
    undeclared = ChunkedProcessor(dataclasses.replace(prefixed.chunks), name="undeclared")
    differences = template_differences(qwen3_tokenizer, undeclared)
    assert differences and all("My guess:" in str(difference) for difference in differences)
