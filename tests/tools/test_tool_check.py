"""``check_additivity`` (so ``trl-env check``) covers tool turns: tool families pass, wrong chunks are reported."""

from __future__ import annotations

import pytest

from tests.tools.families import FAMILIES, processor_for
from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.checks.additivity import AdditivityReport, check_additivity
from trl_env.checks.tool_turns import TOOL_CASES, check_tool_turns


@pytest.mark.parametrize(("template", "preset_name"), FAMILIES)
def test_tool_turns_are_checked_and_pass_for_every_tool_family(family_tokenizers, template, preset_name):
    tokenizer = family_tokenizers[template]
    processor = processor_for(tokenizer, preset_name)
    report = check_additivity(tokenizer, processor)
    assert report.ok, report.table(5)
    plain = check_additivity(tokenizer, processor, tool_turns=False)
    single_call = template.startswith("llama3")  # Llama 3.1/3.2 render one call per turn, no text beside it
    cases = [c for c in TOOL_CASES if not (single_call and (len(c.calls) > 1 or c.text))]
    # every case, with and without a system prompt, with and without the model's stop token
    assert report.cases - plain.cases == len(cases) * 2 * 2
    covered = "several calls per turn; text beside calls"
    if single_call:
        covered = "one call per turn: the template renders no more; no text beside calls: the template drops it"
    assert report.notes == [f"tool turns: checked ({covered})"]
    assert "tool turns: checked" in report.table()


class DropsNewlineBeforeToolResponse(ChunkEncoder):
    """A wrong tool chunk: Qwen's tool message without the newline before ``<tool_response>`` (still additive)."""

    def env_turn(self, delta, tool_results=(), *, close_turn):
        ids, text = super().env_turn(delta, tool_results, close_turn=close_turn)
        if not tool_results:
            return ids, text
        text = text.replace("user\n<tool_response>", "user<tool_response>")
        return self.encode_markup(text), text


class TokenizesPartsApart(ChunkEncoder):
    """A non-additive tool chunk: each tool result tokenized on its own, apart from the markup around it."""

    def encode_parts(self, parts):
        return [
            i for text, trusted in parts for i in (self.encode_markup(text) if trusted else self._encode_text(text))
        ]


def test_a_wrong_tool_chunk_is_reported_as_a_template_difference(qwen3_tokenizer):
    from trl_env.chat.template_processor import ChatTemplateProcessor

    processor = ChatTemplateProcessor(qwen3_tokenizer)
    report = AdditivityReport("qwen3")
    check_tool_turns(DropsNewlineBeforeToolResponse(qwen3_tokenizer, processor), report)
    assert report.additive and not report.ok
    first = report.template_differences[0]
    assert first.where == "tool turn (one call)"
    assert "user\n<tool_response>" in first.template and "user<tool_response>" in first.processor
    assert {d.where for d in report.template_differences} == {f"tool turn ({case.name})" for case in TOOL_CASES}
    assert "renders differently from the tokenizer's chat template" in report.table()


def test_a_non_additive_tool_chunk_is_reported_at_its_boundary(qwen3_tokenizer):
    from trl_env.chat.template_processor import ChatTemplateProcessor

    report = AdditivityReport("qwen3")
    check_tool_turns(TokenizesPartsApart(qwen3_tokenizer, ChatTemplateProcessor(qwen3_tokenizer)), report)
    assert not report.additive and not report.template_differences  # the text is right, its ids are not
    failed = {failure.case for failure in report.failures}
    # "\n" + "\n  5\n\n" + "\n</tool_response>": the newlines merge when tokenized whole
    assert "tool: whitespace around a result sys=False stop=True" in failed
    assert all(case.startswith("tool: ") for case in failed)
    assert "NOT additive" in report.table()


def test_a_processor_whose_generation_prompt_differs_is_reported_not_raised(qwen3_tokenizer):
    from trl_env.chat.chunked_processor import ChunkedProcessor
    from trl_env.chat.presets import preset

    # the no-thinking chunks without enable_thinking=False: the template's prompt opens no empty thought
    processor = ChunkedProcessor(preset("qwen3_nothink").chunks, name="nothink chunks, thinking template")
    report = check_additivity(qwen3_tokenizer, processor)
    assert not report.ok
    prompt = [d for d in report.template_differences if d.where.startswith("prompt with tools")]
    assert prompt and "error: with tools the chat template ends the prompt with" in prompt[0].processor


def test_templates_without_tool_calls_get_a_note_not_a_failure(template_tokenizers):
    from trl_env.chat.presets import preset
    from trl_env.chat.template_processor import ChatTemplateProcessor

    llama3 = template_tokenizers("llama3")  # Llama 3.0 renders no tool calls
    report = check_additivity(llama3, ChatTemplateProcessor(llama3))
    assert report.ok and report.notes == ["tool turns: not checked (the chat template renders no tool calls)"]
    gemma4 = check_additivity(template_tokenizers("gemma4"), preset("gemma4"))  # results inside the model turn
    assert gemma4.ok and gemma4.notes[0].startswith("tool turns: not supported, a tool env is refused")
