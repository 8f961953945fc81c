"""How each chat family writes tool calls, for processors without a response template.

``tokenizer.parse_response`` (with TRL's response templates) is the first choice; presets carry
no tokenizer, and a template TRL does not know has no response template, so the family's own
format is parsed here. Each format splits an answer (reasoning already removed) into its text and
its calls; a call it cannot read becomes a :class:`~trl_env.chat.tool_calls.ToolCall` with an
``error`` (a parse failure, answered with the template's tool error).

Example:
    >>> HERMES.split('Sure.\\n<tool_call>\\n{"name": "add", "arguments": {"a": 1}}\\n</tool_call>')
    ('Sure.', [ToolCall(name='add', arguments={'a': 1}, error=None)])
    >>> HERMES.split('<tool_call>\\n{"name": "add", "arguments": {"a": 1}\\n</tool_call>')[1][0].error
    'malformed tool call: ...'
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from trl_env.chat.tool_calls import ToolCall


def _json_call(body: str, arguments_key: str) -> ToolCall:
    try:
        payload = json.loads(body)
    except json.JSONDecodeError as error:
        return ToolCall("unknown", error=f"malformed tool call: {error.msg} in {body.strip()[:80]!r}")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ToolCall("unknown", error=f"malformed tool call: no function name in {body.strip()[:80]!r}")
    arguments: Any = payload.get(arguments_key, {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCall(payload["name"], error=f"malformed tool call: arguments are not an object: {arguments!r:.80}")
    return ToolCall(payload["name"], arguments)


@dataclass(frozen=True)
class ToolFormat:
    """A family's tool-call syntax: ``<tool_call>`` blocks (JSON or XML bodies) or a bare JSON answer."""

    name: str

    def split(self, answer: str) -> tuple[str, list[ToolCall]]:
        """``(text, calls)`` of one answer; malformed calls carry an ``error``.

        Example:
            >>> LLAMA3_JSON.split('{"name": "add", "parameters": {"a": 1}}')
            ('', [ToolCall(name='add', arguments={'a': 1}, error=None)])
        """
        if self.name == "llama3_json":
            return self._split_bare_json(answer)
        return self._split_blocks(answer)

    def _split_bare_json(self, answer: str) -> tuple[str, list[ToolCall]]:
        # Llama 3.1/3.2 write a call as the whole answer: {"name": ..., "parameters": {...}}
        stripped = answer.strip()
        if not re.match(r'\{\s*"name"\s*:', stripped):
            return answer.strip(), []
        return "", [_json_call(stripped, "parameters")]

    def _split_blocks(self, answer: str) -> tuple[str, list[ToolCall]]:
        start = answer.find("<tool_call>")
        if start < 0:
            return answer.strip(), []
        text, rest = answer[:start].strip(), answer[start:]
        calls = []
        for block in re.split(r"(?=<tool_call>)", rest):
            if not block.strip():
                continue
            body = block[len("<tool_call>") :]
            if "</tool_call>" not in body:
                calls.append(ToolCall("unknown", error="malformed tool call: <tool_call> is never closed"))
                continue
            body, after = body.split("</tool_call>", 1)
            if after.strip():  # text after a call: the template never renders it, so the call is not clean
                calls.append(ToolCall("unknown", error=f"malformed tool call: text after </tool_call>: {after!r:.40}"))
                continue
            calls.append(self._xml_call(body) if self.name == "qwen3_5_xml" else _json_call(body, "arguments"))
        return text, calls

    @staticmethod
    def _xml_call(body: str) -> ToolCall:
        # Qwen3.5: <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>
        match = re.fullmatch(r"\s*<function=([^\n>]+)>(.*?)</function>\s*", body, re.DOTALL)
        if match is None:
            return ToolCall("unknown", error=f"malformed tool call: no <function=...> block in {body.strip()[:80]!r}")
        name, inner = match.groups()
        arguments = {
            key: value for key, value in re.findall(r"<parameter=([^>\n]+)>\n?(.*?)\n?</parameter>", inner, re.DOTALL)
        }
        return ToolCall(name.strip(), arguments)


HERMES = ToolFormat("hermes")  # Qwen2.5, Qwen3: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
QWEN3_5_XML = ToolFormat("qwen3_5_xml")  # Qwen3.5/3.6: <tool_call>\n<function=...>...</function>\n</tool_call>
LLAMA3_JSON = ToolFormat("llama3_json")  # Llama 3.1/3.2: the answer is {"name": ..., "parameters": ...}


def format_of_template(chat_template: str) -> ToolFormat | None:
    """The tool-call format a chat template renders, or None when it renders no tool calls we know.

    Example:
        >>> from trl_env.testing.qwen3_tokenizer import trl_chat_template
        >>> [format_of_template(trl_chat_template(n)).name for n in ("qwen3", "qwen3_5_think", "llama3_2")]
        ['hermes', 'qwen3_5_xml', 'llama3_json']
    """
    if "<tool_call>" in chat_template and "<function=" in chat_template:
        return QWEN3_5_XML
    if "<tool_call>" in chat_template:
        return HERMES
    if '"parameters": ' in chat_template and "ipython" in chat_template:
        return LLAMA3_JSON
    return None
