"""One finished episode: the token sequence TRL trains on, and a readable transcript.

Invariants, checked by :meth:`Episode.check`:

* ``completion_ids``, ``env_mask`` and ``logprobs`` have equal lengths;
* the tokens with ``env_mask == 1`` are exactly the ids the model sampled, in order;
* every environment chunk (``env_mask == 0``) decodes to the text the processor rendered.

Example:
    >>> episode = Episode(seed="s", prompt_ids=[1], prompt_text="p")
    >>> episode.add_model_tokens([5, 6], [-0.1, -0.2], "ab")
    >>> episode.add_env_tokens([7], "c")
    >>> episode.env_mask
    [1, 1, 0]
    >>> episode.check()
"""

from __future__ import annotations

import dataclasses
import math
import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from trl_env.errors import InvariantError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


class StopReason(StrEnum):
    """Why an episode ended (a ``str``: compares equal to its value, and is written as it in JSON)."""

    RUNNING = "running"  # not ended yet
    DONE = "done"  # the env set alive=False
    MAX_TURNS = "max_turns"  # the turn limit was reached
    TOKEN_BUDGET = "token_budget"  # the episode's token budget ran out
    ENV_ERROR = "env_error"  # the env raised, timed out or crashed


class SegmentKind(StrEnum):
    """Where a run of completion tokens came from."""

    MODEL = "model"  # sampled by the model (mask 1)
    ENV = "env"  # rendered environment text (mask 0)
    TOOL = "tool"  # the env's answer to a turn that called tools: its tool messages, rendered by the template (mask 0)
    TURN_END = "turn_end"  # the end-of-turn token the engine appended after a turn cut at its budget (mask 0)


@dataclass
class Turn:
    """One model turn and the environment's answer to it.

    ``span`` is the ``[start, end)`` range of this turn's sampled tokens in ``completion_ids``;
    ``reward`` the change of ``Env.reward`` the turn caused (None when the env was not stepped).
    """

    completion: str
    reasoning: str
    action: str
    parsed_ok: bool
    stopped: bool
    observation: str = ""
    span: tuple[int, int] = (0, 0)
    reward: float | None = None


@dataclass
class Segment:
    """A run of completion tokens from one source (see :class:`SegmentKind`)."""

    start: int
    end: int
    kind: SegmentKind
    text: str

    @property
    def from_model(self) -> bool:
        """True for sampled tokens (mask 1)."""
        return self.kind is SegmentKind.MODEL


@dataclass
class TurnSample:
    """One model turn as its own training sample (``history="template"`` or ``"window"``).

    ``prompt_ids`` is the chat template's rendering of ``Episode.messages`` at ``message_indices`` (the
    conversation before the turn, or its window) with the generation prompt; ``completion_ids`` the sampled ids
    verbatim (mask 1), then the end-of-turn token with mask 0 when the turn was cut at its budget.
    """

    turn: int
    prompt_ids: list[int]
    completion_ids: list[int]
    logprobs: list[float]
    env_mask: list[int]
    message_indices: list[int]


@dataclass
class Episode:
    """Token sequence, reward and transcript of one episode.

    In a tree rollout an episode is one leaf path: ``tree_nodes`` are the ids of the shared prefixes it
    passes through (root first, unique within a batch) and ``tree_branch_points`` the completion offsets
    where each ends (see :mod:`trl_env.trainer.tree_advantages`); both empty for a plain episode.

    Under ``history="template"`` or ``"window"`` every model turn is also its own sample (``turn_samples``,
    rendered from ``messages`` with ``tools``); ``completion_ids`` then holds the sampled turns one after the
    other, without env text (the turns' ``span`` index it), and ``prompt_ids`` the first turn's prompt. An env that
    rewrote its conversation (:class:`~trl_env.core.RewritesHistory`) adds one ``history_rewrites`` record per
    rewrite (``turn``: the first turn rendered from it, ``start``: its first message in ``messages``, ``reason``).
    A tree leaf's ``messages`` and ``turn_samples`` are those of its whole path: the turns before a fork are in
    every leaf below it (:mod:`trl_env.trainer.tree_turns` trains them once).
    """

    seed: str
    prompt_ids: list[int]
    prompt_text: str
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    turns: list[Turn] = field(default_factory=list)
    stop_reason: StopReason = StopReason.RUNNING
    error: str | None = None
    metrics: dict[str, float] | None = None
    segments: list[Segment] = field(default_factory=list, repr=False)
    sampled_ids: list[int] = field(default_factory=list, repr=False)
    tree_nodes: list[str] = field(default_factory=list, repr=False)
    tree_branch_points: list[int] = field(default_factory=list, repr=False)
    messages: list[dict[str, Any]] = field(default_factory=list, repr=False)
    tools: list[dict[str, Any]] = field(default_factory=list, repr=False)
    turn_samples: list[TurnSample] = field(default_factory=list, repr=False)
    history_text: str = field(default="", repr=False)
    history_rewrites: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def num_turns(self) -> int:
        """Number of model turns."""
        return len(self.turns)

    @property
    def parse_failures(self) -> int:
        """Model turns whose answer could not be parsed cleanly."""
        return sum(not turn.parsed_ok for turn in self.turns)

    def add_model_tokens(self, ids: list[int], logprobs: list[float], text: str) -> None:
        """Append sampled tokens (mask 1) with their logprobs."""
        self._add(ids, logprobs, text, SegmentKind.MODEL)
        self.sampled_ids.extend(ids)

    def add_env_tokens(self, ids: list[int], text: str, kind: SegmentKind = SegmentKind.ENV) -> None:
        """Append environment tokens (mask 0; logprob 0.0, never trained on)."""
        self._add(ids, [0.0] * len(ids), text, kind)

    def _add(self, ids: list[int], logprobs: list[float], text: str, kind: SegmentKind) -> None:
        if not ids:
            return
        start = len(self.completion_ids)
        self.completion_ids.extend(ids)
        self.logprobs.extend(logprobs)
        self.env_mask.extend([int(kind is SegmentKind.MODEL)] * len(ids))
        self.segments.append(Segment(start, len(self.completion_ids), kind, text))

    @property
    def failed(self) -> bool:
        """True when the env failed (raised, timed out or crashed) during this episode."""
        return self.stop_reason == StopReason.ENV_ERROR

    @property
    def text(self) -> str:
        """The whole episode as text: prompt, then every segment in order (per-turn histories: the whole
        conversation as the chat template renders it at the end)."""
        if self.history_text:
            return self.history_text
        return self.prompt_text + "".join(segment.text for segment in self.segments)

    def check(self, tokenizer: PreTrainedTokenizerBase | None = None) -> None:
        """Assert the invariants; with ``tokenizer``, also that env chunks decode to their text.

        Example:
            >>> Episode(seed="s", prompt_ids=[1], prompt_text="").check()
        """
        n = len(self.completion_ids)
        if not (len(self.env_mask) == n and len(self.logprobs) == n):
            raise InvariantError(
                f"episode {self.seed!r}: {n} completion ids, {len(self.env_mask)} mask, {len(self.logprobs)} logprobs"
            )
        model_ids = [i for i, m in zip(self.completion_ids, self.env_mask, strict=True) if m == 1]
        if model_ids != self.sampled_ids:
            raise InvariantError(f"episode {self.seed!r}: mask-1 tokens differ from the sampled ids")
        if not all(math.isfinite(x) for x in self.logprobs):
            raise InvariantError(f"episode {self.seed!r}: non-finite logprob")
        for sample in self.turn_samples:
            n = len(sample.completion_ids)
            start, end = self.turns[sample.turn].span
            sampled = [i for i, m in zip(sample.completion_ids, sample.env_mask, strict=True) if m == 1]
            if len(sample.env_mask) != n or len(sample.logprobs) != n or sampled != self.completion_ids[start:end]:
                raise InvariantError(f"episode {self.seed!r}: turn sample {sample.turn} differs from the turn's tokens")
        if tokenizer is None:
            return
        for segment in self.segments:
            if segment.from_model:
                continue
            decoded = tokenizer.decode(
                self.completion_ids[segment.start : segment.end], clean_up_tokenization_spaces=False
            )
            if decoded != unicodedata.normalize("NFC", segment.text):
                raise InvariantError(
                    f"episode {self.seed!r}: env chunk decodes to {decoded!r}, rendered {segment.text!r}"
                )

    def transcript(self) -> dict[str, Any]:
        """A JSON-ready record of the episode for logs and evaluation files.

        Example:
            >>> Episode(seed="s", prompt_ids=[1], prompt_text="hi").transcript()["seed"]
            's'
        """
        return {
            "seed": self.seed,
            "reward": self.reward,
            "num_turns": self.num_turns,
            "stop_reason": self.stop_reason,
            "error": self.error,
            "prompt_tokens": len(self.prompt_ids),
            "completion_tokens": len(self.completion_ids),
            "model_tokens": sum(self.env_mask),
            "parse_failures": self.parse_failures,
            "metrics": self.metrics,
            "turns": [dataclasses.asdict(turn) for turn in self.turns],
            "text": self.text,
            **(
                {"turn_samples": [self._sample_record(sample) for sample in self.turn_samples]}
                if self.turn_samples
                else {}
            ),
            **({"history_rewrites": list(self.history_rewrites)} if self.history_rewrites else {}),
        }

    def _sample_record(self, sample: TurnSample) -> dict[str, Any]:
        return {
            "turn": sample.turn,
            "prompt_tokens": len(sample.prompt_ids),
            "completion_tokens": len(sample.completion_ids),
            "messages": [self.messages[i] for i in sample.message_indices],
        }
