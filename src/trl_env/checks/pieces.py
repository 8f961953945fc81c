"""What the format checks share: a conversation's pieces, their comparison, and the report.

:func:`compare_pieces` tokenizes a conversation whole and compares it with its pieces' own ids (the
additivity property); :class:`AdditivityReport` collects the failures of every check of a processor
(:mod:`~trl_env.checks.additivity`, :mod:`~trl_env.checks.tool_turns`) and prints them as a table.

Example:
    >>> report = AdditivityReport("p", cases=3)
    >>> report.ok, report.table()
    (True, 'p: additive on all 3 cases')
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from trl_env.checks.template import TemplateDifference

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


@dataclass
class AdditivityFailure:
    """One conversation where chunk-wise tokenization differs from whole-text tokenization."""

    case: str
    boundary: str
    context: str
    whole: list[str]
    chunked: list[str]

    def __str__(self) -> str:
        return (
            f"{self.case} at {self.boundary}: text {self.context!r}\n  whole:   {self.whole}\n  chunked: {self.chunked}"
        )


@dataclass
class AdditivityReport:
    """Result of :func:`check_additivity`: ``ok`` when no case failed and the rendering matches the template."""

    processor: str
    cases: int = 0
    failures: list[AdditivityFailure] = field(default_factory=list)
    template_differences: list[TemplateDifference] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was checked beyond the plain cases (tool turns)

    @property
    def additive(self) -> bool:
        """True when every case was additive."""
        return not self.failures

    @property
    def ok(self) -> bool:
        """True when every case was additive and the processor renders as the tokenizer's template."""
        return self.additive and not self.template_differences

    def table(self, limit: int = 20) -> str:
        """A plain-text table of the failures (or one line saying all passed).

        Example:
            >>> print(AdditivityReport("p", cases=3).table())
            p: additive on all 3 cases
        """
        differences = [f"  {difference}" for difference in self.template_differences]
        if differences:
            differences.insert(0, f"{self.processor}: renders differently from the tokenizer's chat template:")
        notes = [f"  {note}" for note in self.notes]
        if self.additive:
            return "\n".join([f"{self.processor}: additive on all {self.cases} cases", *notes, *differences])
        lines = [*differences, f"{self.processor}: {len(self.failures)} of {self.cases} cases NOT additive", *notes, ""]
        lines.append(f"{'case':<34} {'boundary':<28} text around the boundary")
        for failure in self.failures[:limit]:
            lines.append(f"{failure.case[:34]:<34} {failure.boundary[:28]:<28} {failure.context!r}")
            lines.append(f"{'':<34} {'whole':<28} {failure.whole}")
            lines.append(f"{'':<34} {'chunked':<28} {failure.chunked}")
        if len(self.failures) > limit:
            lines.append(f"... and {len(self.failures) - limit} more")
        return "\n".join(lines)


@dataclass
class Piece:
    """A chunk of a conversation: its kind (``"prompt"``, ``"env"``, ``"model"``), text and ids."""

    kind: str
    text: str
    ids: list[int]


def compare_pieces(tokenizer: PreTrainedTokenizerBase, case: str, pieces: Sequence[Piece]) -> AdditivityFailure | None:
    """Compare the tokenization of the joined text with the pieces' own ids.

    Example:
        >>> def piece(kind, text):
        ...     return Piece(kind, text, tokenizer.encode(text, add_special_tokens=False))
        >>> pieces = [piece("model", "Done."), piece("env", "\\n<|im_start|>")]
        >>> compare_pieces(tokenizer, "dot", pieces)
        AdditivityFailure(case='dot', boundary='model | env', ...)
    """
    text = "".join(p.text for p in pieces)
    whole = tokenizer.encode(text, add_special_tokens=False)
    chunked = [i for p in pieces for i in p.ids]
    if whole == chunked:
        return None
    first = next(
        (i for i, (a, b) in enumerate(zip(whole, chunked, strict=False)) if a != b), min(len(whole), len(chunked))
    )
    starts, position = [], 0
    for piece in pieces:
        starts.append(position)
        position += len(piece.ids)
    # a merge across a boundary shows up at or just before it: blame the first boundary at or after the mismatch
    index = next((i for i, start in enumerate(starts) if start >= first and i > 0), len(pieces) - 1)
    if first == 0:
        index = 0
    boundary = f"{pieces[index - 1].kind} | {pieces[index].kind}" if index > 0 else f"start of {pieces[0].kind}"
    char_at = sum(len(p.text) for p in pieces[:index])
    context = text[max(0, char_at - 20) : char_at + 20]
    window = slice(max(0, first - 3), first + 4)
    return AdditivityFailure(
        case=case,
        boundary=boundary,
        context=context,
        whole=tokenizer.convert_ids_to_tokens(whole[window]),
        chunked=tokenizer.convert_ids_to_tokens(chunked[window]),
    )


def can_follow(generation_prompt: str, output: str) -> bool:
    """A generation prompt ending in whitespace already placed the separator: a model whose
    training data was tokenized with that template never starts its answer with more of it
    (``"assistant\n" + "\n42"`` would have been ``"\n\n"`` in one token). Such outputs are
    left out; after a prompt ending in text (``"Assistant:"``) they are checked.

    Example:
        >>> can_follow("<|im_start|>assistant\\n", "\\n42"), can_follow("Assistant:", "\\n42")
        (False, True)
    """
    return not (generation_prompt[-1:].isspace() and output[:1].isspace())
