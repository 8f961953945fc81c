"""reasoning-gym adapter: one procedurally generated task per episode, answered in up to ``max_tries`` tries.

Seeds: the seed's trailing number, modulo ``size``, is the dataset index (``"17"``,
``"train-17"`` → item 17; a seed without one is hashed, see :func:`~trl_env.adapters.seeds.seed_index`).

Curricula: a seed containing ``level<L>`` as a dash-separated part (``"level2-17"``,
``"train-level2-17"``) draws item 17 from the dataset configured by reasoning-gym's curriculum
for that dataset at global level ``L`` (levels past the last one clamp to it). A curriculum
therefore runs through the seed stream: emit ``level0-*`` seeds early in training and
``level3-*`` ones later. Curriculum attributes override ``dataset_kwargs`` of the same name.

Example:
    >>> factory = reasoning_gym_env("basic_arithmetic", size=50, max_tries=2, max_terms=2, max_digits=1)
    >>> env, question = factory().reset("train-3")
    >>> question
    'Calculate ( -9 / 9 ).'
    >>> env, reply = env.step("1")
    >>> reply, env.reward, env.alive
    ('That is not correct. You have 1 try left.', 0.0, True)
    >>> env, reply = env.step("-1")
    >>> reply, env.reward, env.alive, env.metrics()["success"]
    ('Correct!', 1.0, False, 1.0)
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import re
import threading
from collections.abc import Callable
from typing import Any

import reasoning_gym
from reasoning_gym.factory import CURRICULA, DATASETS, create_curriculum

from trl_env.adapters.seeds import seed_index
from trl_env.errors import ConfigError

_LEVEL = re.compile(r"(?:^|-)level([0-9]+)(?=-|$)")
_CACHE: dict[tuple, Any] = {}
_CACHE_LOCK = threading.Lock()
MAX_ANSWER_CHARS = 20_000  # some scorers are slow on huge strings; no real answer is this long


def _dataset(name: str, size: int, dataset_seed: int, level: int | None, kwargs: dict[str, Any]) -> Any:
    """The dataset for these options, built once per process (datasets can load data files)."""
    key = (name, size, dataset_seed, level, json.dumps(kwargs, sort_keys=True, default=repr))
    with _CACHE_LOCK:
        if key not in _CACHE:
            options = {**kwargs, "seed": dataset_seed, "size": size}
            if level is not None:
                curriculum = create_curriculum(name)
                curriculum.set_global_level(level)
                options = dataclasses.asdict(curriculum.generate_configuration(options))
            _CACHE[key] = reasoning_gym.create_dataset(name, **options)
        return _CACHE[key]


class ReasoningGymEnv:
    """A reasoning-gym task: the question, then up to ``max_tries`` answers.

    Reward: ``dataset.score_answer(answer, entry)`` (in [0, 1], 1.0 = correct; a scorer that
    raises on a malformed answer counts as 0.0), times ``retry_discount ** (try - 1)``; the
    episode's reward is the best of its tries so far. The episode ends at the first answer
    scoring 1.0 or after ``max_tries`` answers. The whole action (after the processor removed
    any reasoning) is the answer, or, with ``answer_tag="answer"``, the text inside the last
    ``<answer>...</answer>`` (none: an empty answer).

    Args:
        dataset: a reasoning-gym dataset name, e.g. ``"basic_arithmetic"``.
        size: number of distinct items; seed indices are taken modulo it.
        max_tries: answers allowed per episode (>= 1).
        dataset_seed: the dataset's own seed (which items the indices denote).
        answer_tag: extract the answer from ``<tag>...</tag>`` instead of using the whole action.
        retry_discount: reward factor per extra try, in (0, 1].
        **dataset_kwargs: the dataset's config fields (e.g. ``min_terms=2``).
    """

    def __init__(
        self,
        dataset: str,
        *,
        size: int = 1000,
        max_tries: int = 3,
        dataset_seed: int = 0,
        answer_tag: str | None = None,
        retry_discount: float = 1.0,
        **dataset_kwargs: Any,
    ) -> None:
        self.dataset_name = dataset
        self.size, self.max_tries, self.dataset_seed = size, max_tries, dataset_seed
        self.answer_tag, self.retry_discount = answer_tag, retry_discount
        self.dataset_kwargs = dataset_kwargs
        self.reward, self.alive = 0.0, False
        self.tries, self.best_score = 0, 0.0
        self.entry: dict[str, Any] | None = None
        self._dataset: Any = None

    def reset(self, seed: str) -> tuple[ReasoningGymEnv, str]:
        """Draw the item the seed names (see the module docstring) and return its question."""
        match = _LEVEL.search(seed)
        level = int(match.group(1)) if match else None
        if level is not None and self.dataset_name not in CURRICULA:
            raise ConfigError(f"seed {seed!r} asks for a curriculum level but {self.dataset_name!r} has no curriculum")
        self._dataset = _dataset(self.dataset_name, self.size, self.dataset_seed, level, self.dataset_kwargs)
        self.entry = self._dataset[seed_index(seed, self.size)]
        self.reward, self.alive, self.tries, self.best_score = 0.0, True, 0, 0.0
        return self, str(self.entry["question"])

    def _extract(self, action: str) -> str:
        if self.answer_tag is None:
            return action.strip()
        found = re.findall(rf"<{re.escape(self.answer_tag)}>(.*?)</{re.escape(self.answer_tag)}>", action, re.DOTALL)
        return found[-1].strip() if found else ""

    def step(self, action: str) -> tuple[ReasoningGymEnv, str]:
        """Score one answer; say whether it is correct and how many tries are left."""
        if not self.alive or self.entry is None:
            return self, "The episode is over."
        self.tries += 1
        try:
            score = float(self._dataset.score_answer(answer=self._extract(action)[:MAX_ANSWER_CHARS], entry=self.entry))
        except Exception:  # scorers parse the answer and some raise on junk (e.g. prime_factorization)
            score = 0.0
        score = min(max(score, 0.0), 1.0) if score == score else 0.0
        self.best_score = max(self.best_score, score)
        self.reward = max(self.reward, score * self.retry_discount ** (self.tries - 1))
        left = self.max_tries - self.tries
        if score >= 1.0:
            self.alive = False
            return self, "Correct!"
        if left <= 0:
            self.alive = False
            return self, f"That is not correct. The expected answer was: {self.entry.get('answer')}"
        return self, f"That is not correct. You have {left} {'try' if left == 1 else 'tries'} left."

    def metrics(self) -> dict[str, float]:
        """``success`` (an answer scored 1.0), ``tries`` used and the ``best_score`` before discounting."""
        return {"success": float(self.best_score >= 1.0), "tries": float(self.tries), "best_score": self.best_score}

    def close(self) -> None:
        """Nothing to release (datasets are shared per process)."""


def _suggest(name: str) -> str:
    """The closest dataset names to a misspelt one, and where the full list is."""
    close = difflib.get_close_matches(name, DATASETS, n=3, cutoff=0.6)
    where = f"all {len(DATASETS)} names are in reasoning_gym.factory.DATASETS"
    return f"did you mean {' or '.join(repr(n) for n in close)}? ({where})" if close else where


def reasoning_gym_env(
    dataset: str,
    *,
    size: int = 1000,
    max_tries: int = 3,
    dataset_seed: int = 0,
    answer_tag: str | None = None,
    retry_discount: float = 1.0,
    **dataset_kwargs: Any,
) -> Callable[[], ReasoningGymEnv]:
    """A factory of :class:`ReasoningGymEnv` (same arguments); the options are checked here.

    Args:
        dataset: a name from ``reasoning_gym.factory.DATASETS``.
        size, max_tries, dataset_seed, answer_tag, retry_discount, dataset_kwargs: see
            :class:`ReasoningGymEnv`.

    Returns:
        A picklable zero-argument callable returning a fresh env.

    Example:
        >>> reasoning_gym_env("mazes")
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigError: reasoning_gym_env: unknown dataset 'mazes'; did you mean 'maze'? ...
    """
    if dataset not in DATASETS:
        raise ConfigError(f"reasoning_gym_env: unknown dataset {dataset!r}; {_suggest(dataset)}")
    for name, value, low in (("size", size, 1), ("max_tries", max_tries, 1)):
        if not isinstance(value, int) or value < low:
            raise ConfigError(f"reasoning_gym_env: {name} must be an integer >= {low}, got {value!r}")
    if not 0.0 < retry_discount <= 1.0:
        raise ConfigError(f"reasoning_gym_env: retry_discount must be in (0, 1], got {retry_discount!r}")
    try:  # build the dataset now so that a bad config fails here, not in the first episode
        _dataset(dataset, size, dataset_seed, None, dataset_kwargs)
    except Exception as error:
        raise ConfigError(f"reasoning_gym_env: dataset {dataset!r} rejects {dataset_kwargs}: {error}") from error
    return functools.partial(
        ReasoningGymEnv,
        dataset,
        size=size,
        max_tries=max_tries,
        dataset_seed=dataset_seed,
        answer_tag=answer_tag,
        retry_discount=retry_discount,
        **dataset_kwargs,
    )
