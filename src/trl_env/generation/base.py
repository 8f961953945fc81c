"""Cutting a sampled sequence after its first stop token.

The engine cuts each model turn once with it, after the end-of-turn token
(:meth:`~trl_env.engine.episode_steps.EpisodeSteps.after_generation`); the ``model.generate`` path of
:class:`~trl_env.generation.transformers_generator.TransformersGenerator` drops a finished row's padding with
it. The :class:`~trl_env.core.Generator` protocol itself lives in :mod:`trl_env.core`.

Example:
    >>> cut_at_stop([5, 9, 2, 7], [-0.1, -0.2, -0.3, -0.4], stop_token_ids=[2])
    Generation(ids=[5, 9, 2], logprobs=[-0.1, -0.2, -0.3])
"""

from __future__ import annotations

from collections.abc import Sequence

from trl_env.core import Generation
from trl_env.errors import BackendError


def cut_at_stop(ids: Sequence[int], logprobs: Sequence[float], stop_token_ids: Sequence[int]) -> Generation:
    """Keep ``ids`` (and their logprobs) up to and including the first stop token.

    Example:
        >>> cut_at_stop([1, 2], [0.0, 0.0], stop_token_ids=[9]).ids
        [1, 2]
    """
    if len(ids) != len(logprobs):
        raise BackendError(f"generator returned {len(ids)} ids but {len(logprobs)} logprobs")
    stops = set(stop_token_ids)
    end = next((i + 1 for i, token in enumerate(ids) if token in stops), len(ids))
    return Generation(list(ids[:end]), [float(x) for x in logprobs[:end]])
