"""How a model turn ends: the processor's end-of-turn token, its id, and the ids a generator stops at.

A processor says how its turn ends through :class:`~trl_env.core.TurnDelimited` (``turn_end``,
``after_turn_end``); :class:`TurnEnd` is that answer checked against a tokenizer, the one place the rest of
trl-env reads it from: the chunk encoder renders ``after`` before the next user turn, the engine cuts a sampled
turn after ``id`` (and appends it, mask 0, when a turn runs out of tokens), and :meth:`TurnEnd.stop_token_ids`
is the list a generator is built with.

Example:
    >>> from trl_env.chat.presets import preset
    >>> ending = TurnEnd.of(preset("qwen3_thinking"), tokenizer)
    >>> ending.text, ending.after, ending.id
    ('<|im_end|>', '\\n', 151645)
    >>> ending.stop_token_ids(model_eos=[151643])  # the model's EOS ids, then the end-of-turn token
    [151643, 151645]
    >>> TurnEnd.of(object(), tokenizer)
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigTypeError: object cannot say how a model turn ends: it lacks turn_end, after_turn_end...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trl_env.core import TurnDelimited
from trl_env.errors import ConfigTypeError, TemplateError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase

MEMBERS = ("turn_end", "after_turn_end")


def require_turn_delimited(processor: Any) -> TurnDelimited:
    """Return ``processor`` if it says how a model turn ends; else raise one ``ConfigTypeError`` naming what it lacks.

    Args:
        processor: the chat format given to a rollout or a ``rollout_func``.

    Returns:
        The same processor, typed as :class:`~trl_env.core.TurnDelimited`.

    Example:
        >>> class Plain:
        ...     turn_end = "<|im_end|>"
        >>> require_turn_delimited(Plain())
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigTypeError: Plain cannot say how a model turn ends: it lacks after_turn_end...
    """
    if isinstance(processor, TurnDelimited):
        return processor
    missing = ", ".join(name for name in MEMBERS if not hasattr(processor, name))
    raise ConfigTypeError(
        f"{type(processor).__name__} cannot say how a model turn ends: it lacks {missing}. Give it the properties "
        "turn_end (the special token that closes an assistant turn, e.g. '<|im_end|>') and after_turn_end (what "
        "the template writes after it, e.g. '\\n'), the TurnDelimited protocol of trl_env.core, or build it as "
        "ChatTemplateProcessor(tokenizer) or ChunkedProcessor(ChatChunks(...))"
    )


@dataclass(frozen=True)
class TurnEnd:
    """A processor's end of turn, checked against a tokenizer.

    Attributes:
        text: the special token that closes a model turn (``"<|im_end|>"``).
        after: what the template writes after it before the next user turn (Qwen's ``"\\n"``).
        id: the token id of ``text`` (one token).
        eos_id: the tokenizer's EOS id (None if it has none).
    """

    text: str
    after: str
    id: int
    eos_id: int | None = None

    @classmethod
    def of(cls, processor: Any, tokenizer: PreTrainedTokenizerBase) -> TurnEnd:
        """Read ``processor``'s end of turn (see :func:`require_turn_delimited`) and find its token id.

        Raises:
            ConfigTypeError: the processor cannot say how its turn ends.
            TemplateError: its end-of-turn text is not exactly one token of ``tokenizer``.
        """
        delimited = require_turn_delimited(processor)
        text, after = delimited.turn_end, delimited.after_turn_end
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise TemplateError(f"the end-of-turn text {text!r} is {len(ids)} tokens, expected one special token")
        return cls(text=text, after=after, id=ids[0], eos_id=tokenizer.eos_token_id)

    def stop_token_ids(self, model_eos: int | Sequence[int] | None = None) -> list[int]:
        """The ids a generator stops sampling at: ``model_eos``, then the end-of-turn token and the tokenizer's EOS.

        Args:
            model_eos: the model's EOS id(s) (``model.generation_config.eos_token_id``, or a ``GRPOTrainer``'s
                ``eos_token_ids``), first and in their order.

        Returns:
            The ids without duplicates. Sampling stops at any of them; the engine treats only :attr:`id` as the
            turn's own end and appends it (mask 0) after a turn that stopped at another.
        """
        ids = [] if model_eos is None else ([model_eos] if isinstance(model_eos, int) else [int(t) for t in model_eos])
        for token in (self.id, self.eos_id):
            if token is not None and token not in ids:
                ids.append(token)
        return ids
