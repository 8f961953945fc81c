"""The tool-calling families the tool tests cover, and their processors."""

from __future__ import annotations

# (template, processor): the automatic processor (None) or a preset; Qwen3 thinking on and off, Llama 3.1
# and 3.2 (bare JSON calls), Qwen3.5 (XML calls, presets)
FAMILIES = [
    ("qwen3", None),
    ("qwen3", "qwen3_thinking"),
    ("qwen3", "qwen3_nothink"),
    ("llama3_1", None),
    ("llama3_2", None),
    ("qwen3_5_think", "qwen3_5_thinking"),
    ("qwen3_5_nothink", "qwen3_5_nothink"),
]


def processor_for(tokenizer, preset_name):
    """The automatic processor of ``tokenizer``, or the named preset."""
    from trl_env.chat.presets import preset
    from trl_env.chat.template_processor import ChatTemplateProcessor

    return preset(preset_name) if preset_name else ChatTemplateProcessor(tokenizer)


def model_answer(template: str, text: str, calls: list[tuple[str, dict]]) -> str:
    """What a model of the family writes for ``text`` followed by ``calls`` (as its template renders them)."""
    import json

    if template.startswith("llama3"):
        assert not text and len(calls) == 1, "Llama 3.x writes one bare call per turn"
        name, arguments = calls[0]
        return json.dumps({"name": name, "parameters": arguments})
    if template.startswith("qwen3_5"):
        blocks = [
            f"<tool_call>\n<function={name}>\n"
            + "".join(f"<parameter={key}>\n{value}\n</parameter>\n" for key, value in arguments.items())
            + "</function>\n</tool_call>"
            for name, arguments in calls
        ]
        return (text + "\n\n" if text else "") + "\n".join(blocks)
    blocks = [f'<tool_call>\n{{"name": "{n}", "arguments": {json.dumps(a)}}}\n</tool_call>' for n, a in calls]
    return (text + "\n" if text else "") + "\n".join(blocks)
