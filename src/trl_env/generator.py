"""The ``Generator`` protocol: what the rollout engine asks of a text-generation backend.

A generator takes a batch of token-id contexts (one per live episode) and returns, for
each, the sampled token ids and the log-probability of each sampled token under the
sampling distribution (after temperature). It stops a sequence at the end-of-turn token
(which it includes in the returned ids) or after ``max_new_tokens``.

Example:
    >>> class Constant:
    ...     def generate(self, contexts, max_new_tokens):
    ...         return [Generation(ids=[7] * max_new_tokens, logprobs=[0.0] * max_new_tokens) for _ in contexts]
    >>> Constant().generate([[1, 2], [3]], 2)[0].ids
    [7, 7]
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable


class Generation(NamedTuple):
    """One sampled continuation: token ids and the logprob of each sampled token.

    A plain ``(ids, logprobs)`` tuple is accepted wherever a ``Generation`` is.
    """

    ids: list[int]
    logprobs: list[float]


@runtime_checkable
class Generator(Protocol):
    """A batched sampler over token-id contexts."""

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]: ...
