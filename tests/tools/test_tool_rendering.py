"""Tool turns render exactly as ``apply_chat_template`` does, tokenize additively, and parse back.

For every family: the prompt with tools equals the template's prompt; the env chunk after a model
turn that called tools equals the template's text after that turn's end-of-turn token (single and
multi-call turns, tool errors, a turn mixing text and calls, a user line after the results); the
pieces tokenized one by one equal the whole text tokenized; the model's answer parses back to the
calls; an env text spelling a special token stays plain text.
"""

from __future__ import annotations

import pytest

from tests.tools.families import FAMILIES, model_answer, processor_for
from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.chat.tool_calls import ToolCall, parse_tool_calls, tool_schema
from trl_env.checks.additivity import Piece, compare_pieces
from trl_env.core import ToolResult


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first term.
        b: The second term.
    """
    return a + b


def divide(a: int, b: int) -> float:
    """Divide two integers.

    Args:
        a: The dividend.
        b: The divisor.
    """
    return a / b


SCHEMAS = [tool_schema(add), tool_schema(divide)]
ERROR = "{'error': 'division by zero'}"
# (name, assistant text, calls, results, user line after the results)
CASES = [
    ("one call", "", [("add", {"a": 2, "b": 3})], ["5"], ""),
    ("tool error", "", [("divide", {"a": 1, "b": 0})], [ERROR], ""),
    ("two calls", "", [("add", {"a": 2, "b": 3}), ("divide", {"a": 6, "b": 3})], ["5", "2.0"], ""),
    ("text and calls", "Let me compute.", [("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1})], ["5", "2"], ""),
    ("results then a user line", "", [("add", {"a": 2, "b": 3})], ["5\nmultiline\n"], "Now divide."),
    ("result spelling special tokens", "", [("add", {"a": 2, "b": 3})], ['<|im_end|><|eot_id|> "q"'], ""),
]


def _single_call_only(template: str, text: str, calls: list) -> bool:
    return template.startswith("llama3") and (bool(text) or len(calls) > 1)


# Llama 3.x renders one tool call per assistant turn and no text beside it: those cases do not exist there.
FAMILY_CASES = [
    pytest.param(template, preset_name, case, id=f"{template}-{preset_name}-{case[0]}")
    for template, preset_name in FAMILIES
    for case in CASES
    if not _single_call_only(template, case[1], case[2])
]


@pytest.mark.parametrize(("template", "preset_name", "case"), FAMILY_CASES)
@pytest.mark.parametrize("system_prompt", ["", "You are a careful calculator."])
def test_tool_turn_equals_template_and_is_additive(family_tokenizers, template, preset_name, system_prompt, case):
    _, text, calls, results, user_line = case
    tokenizer = family_tokenizers[template]
    processor = processor_for(tokenizer, preset_name)
    kwargs = getattr(processor, "template_kwargs", {})
    encoder = ChunkEncoder(tokenizer, processor)
    delta = "What is 2 + 3?"

    prompt_ids, prompt_text = encoder.prompt(system_prompt, delta, SCHEMAS)
    opening = [{"role": "system", "content": system_prompt}] if system_prompt else []
    expected_prompt = tokenizer.apply_chat_template(
        [*opening, {"role": "user", "content": delta}], tools=SCHEMAS, tokenize=False, add_generation_prompt=True,
        **kwargs,
    )  # fmt: skip
    assert prompt_text == expected_prompt

    tool_results = [ToolResult(name, result) for (name, _), result in zip(calls, results, strict=True)]
    env_ids, env_text = encoder.env_turn(user_line, tool_results, close_turn=False)
    conversation = [
        *opening,
        {"role": "user", "content": delta},
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls],
        },
        *({"role": "tool", "name": n, "content": r} for (n, _), r in zip(calls, results, strict=True)),
        *([{"role": "user", "content": user_line}] if user_line else []),
    ]
    full = tokenizer.apply_chat_template(
        conversation, tools=SCHEMAS, tokenize=False, add_generation_prompt=True, **kwargs
    )
    # the env chunk is the template's text after the calling turn's end-of-turn token
    assert full.endswith(env_text)
    assert full[: len(full) - len(env_text)].endswith(encoder.turn_end)
    for result in results:
        assert result.strip().replace('"', "") in env_text.replace('\\"', "").replace('"', "").replace("\\n", "\n")

    answer = model_answer(template, text, calls)
    if getattr(processor, "generation_opens_thinking", False):  # Qwen3.5 thinking: the prompt opened <think>
        answer = "Adding two numbers.\n</think>\n\n" + answer
    parsed = processor.parse(answer)
    assert parsed.ok
    said, parsed_calls = parse_tool_calls(parsed.action)
    assert said == text
    typed = [ToolCall(c.name, {k: int(v) for k, v in c.arguments.items()}) for c in parsed_calls]
    assert typed == [ToolCall(n, a) for n, a in calls]

    def piece(kind: str, body: str) -> Piece:
        return Piece(kind, body, tokenizer.encode(body, add_special_tokens=False))

    pieces = [
        Piece("prompt", prompt_text, prompt_ids),
        piece("model+stop", answer + encoder.turn_end),
        Piece("tool", env_text, env_ids),
        piece("model+stop", "The answer is 5." + encoder.turn_end),
    ]
    if "special" in case[0]:  # env text is plain text: no special token id comes from it
        specials = set(tokenizer.all_special_ids) | {tokenizer.convert_tokens_to_ids(encoder.turn_end)}
        plain_ids, _ = encoder.env_turn(user_line, [ToolResult(n, "x") for n, _ in calls], close_turn=False)
        assert sum(i in specials for i in env_ids) == sum(i in specials for i in plain_ids)
        assert tokenizer.decode(env_ids) == env_text
    else:
        assert compare_pieces(tokenizer, case[0], pieces) is None


@pytest.mark.parametrize(("template", "preset_name"), FAMILIES)
def test_malformed_tool_calls_are_parse_failures(family_tokenizers, template, preset_name):
    processor = processor_for(family_tokenizers[template], preset_name)
    broken = {
        "llama3": '{"name": "add", "parameters": {"a": 2, "b": }',
        "qwen3_5": "<tool_call>\n<function=add>\n<parameter=a>\n2\n</parameter>\n</tool_call>",
        "qwen3": '<tool_call>\n{"name": "add", "arguments": {"a": 2,}}\n</tool_call>',
    }
    answer = next(text for prefix, text in broken.items() if template.startswith(prefix))
    thought = "Hmm.</think>\n\n" if getattr(processor, "generation_opens_thinking", False) else ""
    parsed = processor.parse(thought + answer)
    assert not parsed.ok
    _, calls = parse_tool_calls(parsed.action)
    assert len(calls) == 1 and calls[0].error and calls[0].error.startswith("malformed tool call")
    unclosed = processor.parse(thought + "<tool_call>\n" + '{"name": "add"')
    if not template.startswith("llama3"):
        assert not unclosed.ok


def test_tool_declarations_spelling_special_tokens_are_refused(qwen3_tokenizer):
    from trl_env.chat.template_processor import ChatTemplateProcessor

    encoder = ChunkEncoder(qwen3_tokenizer, ChatTemplateProcessor(qwen3_tokenizer))
    schema = {"type": "function", "function": {"name": "f", "description": "ends <|im_end|> here", "parameters": {}}}
    with pytest.raises(ValueError, match="special token"):
        encoder.prompt("", "Hi", [schema])
