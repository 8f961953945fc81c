"""Check tool turns too: additivity and template equality of the chunks of tool-calling episodes.

:func:`~trl_env.checks.additivity.check_additivity` calls :func:`check_tool_turns` for templates that
render tool calls. For each case (one call, a tool error, several calls, text beside calls, results
followed by a user line, results with odd whitespace, unicode, a long result) it builds the episode
as the engine does -- the prompt with tools, the model's calling turn, the tool chunk, the next answer --
and checks

* **template equality**: the prompt is the template's prompt with ``tools=``; the tool chunk is the
  template's text after the calling turn's end-of-turn token, and ends with the processor's
  generation prompt (a model sees the same generation prompt after tools as after a user turn);
* **additivity**: the pieces tokenized one by one equal the whole text tokenized, with and without
  the model's stop token (without it, the tool chunk opens with the end-of-turn token).

The model's calling turn is the template's own rendering of that assistant message, so the check
needs no per-family writer. What a template can render is detected by rendering it: templates that
render no tool call (Llama 3.0, LFM2, which keep calls in the text) are not checked; Llama 3.1/3.2
render one call per turn and no text beside it, so those cases are left out there. A template that
renders calls but whose tool turns trl-env cannot chunk (Gemma 4 writes the results inside the model
turn) gets a note, not a failure: a plain env still trains with it, a tool env is refused at its
first episode.

Example:
    >>> from trl_env.checks.pieces import AdditivityReport
    >>> report = AdditivityReport("qwen3")
    >>> check_tool_turns(encoder, report)
    >>> report.ok, report.cases, report.notes
    (True, 16, ['tool turns: checked (several calls per turn; text beside calls)'])
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.checks.pieces import AdditivityReport, Piece, can_follow, compare_pieces
from trl_env.checks.template import TemplateDifference
from trl_env.core import ToolResult


def _schema(name: str, description: str) -> dict[str, Any]:
    integer = {"type": "integer"}
    parameters = {"type": "object", "properties": {"a": integer, "b": integer}, "required": ["a", "b"]}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


TOOLS = [_schema("add", "Add two integers."), _schema("divide", "Divide two integers.")]
QUESTION = "What is (2 + 3) / 5? Use the tools."
ERROR = "{'error': 'division by zero'}"
NEXT_ANSWER = "The answer is 1."
THOUGHT = "Let me compute."  # what a model writes in a thinking block its generation prompt opened


@dataclass(frozen=True)
class ToolCase:
    """One tool turn: what the model says beside its calls, the calls, their results, a user line after them."""

    name: str
    calls: tuple[tuple[str, dict[str, int]], ...]
    results: tuple[str, ...]
    text: str = ""
    user_line: str = ""


TOOL_CASES = [
    ToolCase("one call", (("add", {"a": 2, "b": 3}),), ("5",)),
    ToolCase("tool error", (("divide", {"a": 1, "b": 0}),), (ERROR,)),
    ToolCase("two calls", (("add", {"a": 2, "b": 3}), ("divide", {"a": 5, "b": 5})), ("5", "1.0")),
    ToolCase("text and calls", (("add", {"a": 2, "b": 3}), ("add", {"a": 1, "b": 1})), ("5", "2"), "I will add."),
    ToolCase("results then a user line", (("add", {"a": 2, "b": 3}),), ("5",), user_line="Now divide by 5."),
    ToolCase("whitespace around a result", (("add", {"a": 2, "b": 3}),), ("\n  5\n\n",)),
    ToolCase("unicode result", (("add", {"a": 2, "b": 3}),), ("résultat: 5 ✓ 日本語 🎉",)),
    ToolCase("long result", (("add", {"a": 2, "b": 3}),), ("Lorem ipsum dolor sit amet. " * 40,)),
]


@dataclass(frozen=True)
class ToolSupport:
    """What a chat template renders of tool turns (found by rendering it)."""

    calls: bool  # declarations, an assistant tool call and a tool result
    several_calls: bool  # more than one call in one assistant turn
    text_beside_calls: bool  # assistant text next to its calls

    def allows(self, case: ToolCase) -> bool:
        """Whether ``case`` is a turn this template can render."""
        return (len(case.calls) == 1 or self.several_calls) and (not case.text or self.text_beside_calls)


def _prompt_messages(system_prompt: str) -> list[dict[str, Any]]:
    opening = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return [*opening, {"role": "user", "content": QUESTION}]


def _conversation(system_prompt: str, case: ToolCase) -> list[dict[str, Any]]:
    """The prompt, the assistant's calls, the ``tool`` messages and the user line of ``case``."""
    calls = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in case.calls]
    results = [{"role": "tool", "name": n, "content": r} for (n, _), r in zip(case.calls, case.results, strict=True)]
    user = [{"role": "user", "content": case.user_line}] if case.user_line else []
    return [
        *_prompt_messages(system_prompt),
        {"role": "assistant", "content": case.text, "tool_calls": calls},
        *results,
        *user,
    ]


def tool_support(encoder: ChunkEncoder) -> ToolSupport:
    """Render probe conversations to find which tool turns the template renders.

    Example:
        >>> tool_support(encoder)
        ToolSupport(calls=True, several_calls=True, text_beside_calls=True)
    """
    if not encoder.tokenizer.chat_template:
        return ToolSupport(False, False, False)
    render = encoder.tool_turns.render

    def renders(case: ToolCase, *needles: str) -> bool:
        try:
            text = render(_conversation("", case), TOOLS, True)
        except Exception:  # templates refuse what they cannot render (Llama 3.1: "only supports single tool-calls")
            return False
        return all(needle in text for needle in needles)

    probe = ToolCase("probe", (("add", {"a": 271, "b": 828}),), ("RESULTQXZ",))
    if not renders(probe, "Add two integers.", "271", "RESULTQXZ"):
        return ToolSupport(False, False, False)
    several = ToolCase("probe", (("add", {"a": 271, "b": 828}), ("divide", {"a": 314, "b": 159})), ("R1", "R2"))
    text = ToolCase("probe", probe.calls, probe.results, text="TEXTQXZ")
    return ToolSupport(True, renders(several, "271", "314", "R1", "R2"), renders(text, "TEXTQXZ", "271"))


def _describe(support: ToolSupport) -> str:
    """What the tool cases cover, in words.

    Example:
        >>> _describe(ToolSupport(True, several_calls=False, text_beside_calls=False))
        'one call per turn: the template renders no more; no text beside calls: the template drops it'
    """
    several = "several calls per turn" if support.several_calls else "one call per turn: the template renders no more"
    text = "text beside calls" if support.text_beside_calls else "no text beside calls: the template drops it"
    return f"{several}; {text}"


def check_tool_turns(encoder: ChunkEncoder, report: AdditivityReport, system_prompts: Sequence[str] = ("",)) -> None:
    """Add the tool-turn cases of ``encoder`` (its tokenizer's template) to ``report``.

    Additivity failures join ``report.failures`` (boundaries named ``model | tool``), template
    mismatches ``report.template_differences`` (``prompt with tools``, ``tool turn (...)``); what was
    checked, or why nothing was, is a line of ``report.notes``.
    """
    support = tool_support(encoder)
    if not support.calls:
        report.notes.append("tool turns: not checked (the chat template renders no tool calls)")
        return
    try:
        encoder.env_turn("", [ToolResult("add", "5")], close_turn=False)
    except ValueError as error:  # e.g. Gemma 4: the results sit inside the model turn, no end-of-turn before them
        report.notes.append(f"tool turns: not supported, a tool env is refused: {error}")
        return
    report.notes.append(f"tool turns: checked ({_describe(support)})")
    for system_prompt in system_prompts:
        where = "prompt with tools" + (" (with a system prompt)" if system_prompt else "")
        expected = encoder.tool_turns.render(_prompt_messages(system_prompt), TOOLS, True)
        try:
            prompt = encoder.prompt(system_prompt, QUESTION, TOOLS)
        except ValueError as error:  # the engine refuses this prompt: e.g. the processor's generation prompt differs
            report.template_differences.append(TemplateDifference(where, expected, f"error: {error}"))
            continue
        if prompt[1] != expected:
            report.template_differences.append(TemplateDifference(where, expected, prompt[1]))
        for case in TOOL_CASES:
            if support.allows(case):
                _check_case(encoder, report, system_prompt, prompt, case)


def _check_case(
    encoder: ChunkEncoder,
    report: AdditivityReport,
    system_prompt: str,
    prompt: tuple[list[int], str],
    case: ToolCase,
) -> None:
    where = f"tool turn ({case.name}{', with a system prompt' if system_prompt else ''})"
    try:
        endings = list(_endings(encoder, report, system_prompt, prompt, case, where))
    except ValueError as error:  # the engine would refuse this turn at run time: report it, do not stop
        report.template_differences.append(TemplateDifference(where, "(a rendering)", f"error: {error}"))
        return
    for pieces, stop in endings:
        report.cases += 1
        failure = compare_pieces(encoder.tokenizer, f"tool: {case.name} sys={bool(system_prompt)} stop={stop}", pieces)
        if failure is not None:
            report.failures.append(failure)


def _endings(
    encoder: ChunkEncoder,
    report: AdditivityReport,
    system_prompt: str,
    prompt: tuple[list[int], str],
    case: ToolCase,
    where: str,
) -> Iterator[tuple[list[Piece], bool]]:
    """The episode's pieces with and without the stop token; a tool chunk unlike the template's goes to ``report``."""
    tokenizer, end = encoder.tokenizer, encoder.turn_end
    prompt_ids, prompt_text = prompt
    # the template's own text: the prompt, the calling turn, its end-of-turn token, then the tool chunk
    full = encoder.tool_turns.render(_conversation(system_prompt, case), TOOLS, True)
    start = _answer_start(full, prompt_text)
    call_end = full.find(end, start)
    answer, expected_chunk = full[start:call_end], full[call_end + len(end) :]
    if not can_follow(encoder.generation_prompt_tail, answer):  # an empty thought: a model writes one
        answer = THOUGHT + answer
    results = [ToolResult(n, r) for (n, _), r in zip(case.calls, case.results, strict=True)]
    for stop in (True, False):
        chunk_ids, chunk_text = encoder.env_turn(case.user_line, results, close_turn=not stop)
        if stop and chunk_text != expected_chunk:
            report.template_differences.append(TemplateDifference(where, expected_chunk, chunk_text))
        elif stop and not chunk_text.endswith(encoder.generation_prompt_tail):
            tail = encoder.generation_prompt_tail
            report.template_differences.append(TemplateDifference(where + ": generation prompt", tail, chunk_text))
        body = answer + (end if stop else "")
        yield (
            [
                Piece("prompt", prompt_text, prompt_ids),
                Piece("model" + ("+stop" if stop else ""), body, tokenizer.encode(body, add_special_tokens=False)),
                Piece("tool", chunk_text, chunk_ids),
                Piece("model+stop", NEXT_ANSWER + end, tokenizer.encode(NEXT_ANSWER + end, add_special_tokens=False)),
            ],
            stop,
        )


def _answer_start(full: str, prompt_text: str) -> int:
    """Where the calling turn's answer starts in ``full``: after the prompt, or -- when the generation prompt
    differs from the history's (Qwen3 without thinking drops the empty thought) -- at the start of the line
    where they part.

    Example:
        >>> _answer_start("assistant\\n<tool_call>", "assistant\\n<think>\\n\\n</think>\\n\\n")
        10
    """
    if full.startswith(prompt_text):
        return len(prompt_text)
    common = 0
    for x, y in zip(full, prompt_text, strict=False):
        if x != y:
            break
        common += 1
    return full.rfind("\n", 0, common) + 1
