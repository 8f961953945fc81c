"""Zero-variance groups: drop GRPO groups whose rewards are all equal, and fill the batch from further episodes.

A GRPO group whose scorable rewards are all equal (all fail, all succeed) gets advantage 0 everywhere: its
episodes cost a step's sampling and training and move nothing. ``RolloutConfig.zero_variance`` decides what
happens to them (docs/zero_variance.md):

* ``"keep"`` (the default): nothing; the batch is TRL's as before;
* ``"filter"``: they stay in the batch (TRL needs its shape) but leave the loss: their ``env_mask`` is all 0, so
  their tokens are out of the loss, out of TRL's token denominators and out of the KL term;
* ``"resample"``: each such group is replaced by a group of a new seed drawn from the train dataset, played in
  further rounds until every slot holds a group with variance or ``max_extra_episodes`` is spent; a slot
  left over keeps its zero-variance group, filtered as above.

The decision reads the reward ``env_reward`` returns (the env's reward; None for a failed episode unless
``failure_reward`` is set): a group is zero-variance when its scorable rewards span at most ``TOLERANCE``.

Example:
    >>> zero_variance_groups([1.0, 1.0, 0.0, 1.0, None, 0.5, 0.5, None], group_size=4)
    [False, True]
    >>> draw = SeedDraw(["a", "b", "c"], seed=0)
    >>> sorted(draw(2, avoid={"a"}))
    ['b', 'c']
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from trl_env.episode import Episode
from trl_env.errors import ConfigError

TOLERANCE = 1e-6  # rewards closer than this count as equal (TRL's std of such a group is ~0 too)
MODES: tuple[str, ...] = ("keep", "filter", "resample")
STAT_NAMES: tuple[str, ...] = ("groups", "zero_variance", "extra_episodes", "replaced", "dropped", "extra_discarded")


def episode_score(episode: Episode, failure_reward: float | None) -> float | None:
    """The reward ``env_reward`` gives this episode: None (unscorable) for a failed one unless ``failure_reward``.

    Example:
        >>> episode_score(Episode(seed="s", prompt_ids=[1], prompt_text="", reward=0.5), None)
        0.5
    """
    if episode.failed:
        return failure_reward
    return episode.reward


def zero_variance_groups(rewards: Sequence[float | None], group_size: int) -> list[bool]:
    """For each consecutive group of ``group_size`` rewards: whether its scorable ones are all equal.

    A group with fewer than two scorable rewards counts as zero-variance too (no comparison to learn from).

    Example:
        >>> zero_variance_groups([None, 2.0, 1.0, 1.0000001], group_size=2)
        [True, True]
    """
    flags = []
    for start in range(0, len(rewards), group_size):
        scored = [r for r in rewards[start : start + group_size] if r is not None]
        flags.append(len(scored) < 2 or max(scored) - min(scored) <= TOLERANCE)
    return flags


def check_groups(seeds: Sequence[str], group_size: int) -> None:
    """Refuse a batch that is not whole groups: ``group_size`` equal seeds, one group after another.

    Raises:
        ConfigError: the seeds are not whole groups (a group split between processes).

    Example:
        >>> check_groups(["a", "a", "b"], 2)
        Traceback (most recent call last):
        ...
        trl_env.errors.ConfigError: zero_variance needs whole GRPO groups in each process's batch ...
    """
    whole = len(seeds) % group_size == 0 and all(
        len(set(seeds[start : start + group_size])) == 1 for start in range(0, len(seeds), group_size)
    )
    if not whole:
        raise ConfigError(
            f"zero_variance needs whole GRPO groups in each process's batch ({group_size} equal seeds in a row); "
            f"got {len(seeds)} seeds {list(seeds[:8])}... Make per_device_train_batch_size x steps_per_generation "
            "a multiple of num_generations, or use zero_variance='keep'"
        )


class SeedDraw:
    """Seeds for replacement groups: dataset prompts drawn at random (seeded), not already in the batch.

    Args:
        prompts: the train dataset's seeds (any sequence: a list, or a lazy view of the dataset's rows).
        seed: the draw's random seed (the trainer's seed and process: the same run draws the same seeds).
    """

    def __init__(self, prompts: Sequence[str], seed: Any = 0) -> None:
        if len(prompts) == 0:
            raise ConfigError("zero_variance='resample' draws replacement seeds from the train dataset, which is empty")
        self.prompts = prompts
        self.random = random.Random(str(seed))

    def __call__(self, count: int, avoid: set[str]) -> list[str]:
        """``count`` seeds, distinct and outside ``avoid`` where the dataset has enough (else repeats allowed)."""
        chosen: list[str] = []
        for _ in range(count):
            for _try in range(32):  # a small dataset may have no unseen seed left: then take any
                seed = self.prompts[self.random.randrange(len(self.prompts))]
                if seed not in avoid and seed not in chosen:
                    break
            chosen.append(seed)
        return chosen


class GroupedEpisodes(list):
    """A filled batch (a list of episodes, in TRL's order) and what the filter did to reach it.

    Attributes:
        dropped: per episode, True when its group has zero variance and is left out of the loss.
        discarded: episodes played as replacements and not used (their groups had zero variance too).
        stats: the step's counts, by :data:`STAT_NAMES`.
    """

    dropped: list[bool]
    discarded: list[Episode]
    stats: dict[str, float]


@dataclass
class GroupFilter:
    """Plays a batch and deals with its zero-variance groups (``mode`` ``"filter"`` or ``"resample"``).

    Args:
        mode: ``"filter"`` or ``"resample"`` (``"keep"`` needs no filter).
        group_size: the trainer's ``num_generations``.
        max_extra_episodes: most replacement episodes per batch (each group costs ``group_size``); None: as many
            as the batch's own episodes.
        failure_reward: the config's ``failure_reward`` (a failed episode's score).
        draw: replacement seeds (:class:`SeedDraw`); needed by ``"resample"``.
    """

    mode: str
    group_size: int
    max_extra_episodes: int | None
    failure_reward: float | None = None
    draw: Callable[[int, set[str]], list[str]] | None = None
    replacement_runs: int = field(default=0, init=False)  # names replacement trees apart

    def play(
        self,
        play: Callable[[list[str]], list[Episode]],
        seeds: list[str],
        go_on: Callable[[bool], bool] = lambda more: more,
    ) -> GroupedEpisodes:
        """Play ``seeds`` (whole groups), then replace or mark their zero-variance groups.

        Args:
            play: plays one episode per seed, in order (the engine's ``run``).
            seeds: TRL's batch, ``group_size`` equal seeds per group.
            go_on: whether another round is played, given whether this process wants one; several processes
                pass a collective "any" here so that every process plays the same number of rounds.

        Returns:
            The batch, as long as ``seeds``, with the filter's marks and counts.
        """
        check_groups(seeds, self.group_size)
        g = self.group_size
        episodes = list(play(seeds))
        flat = zero_variance_groups([episode_score(e, self.failure_reward) for e in episodes], g)
        slots = [k for k, is_flat in enumerate(flat) if is_flat]  # groups still waiting for a replacement
        stats = dict.fromkeys(STAT_NAMES, 0.0)
        stats["groups"], stats["zero_variance"] = float(len(flat)), float(len(slots))
        discarded: list[Episode] = []
        budget = len(seeds) if self.max_extra_episodes is None else self.max_extra_episodes
        budget = budget if self.mode == "resample" else 0
        avoid = set(seeds)
        while go_on(bool(slots) and budget >= g):
            count = min(len(slots), budget // g) if slots else 0
            new_seeds = self.draw(count, avoid) if self.draw is not None and count else []
            avoid.update(new_seeds)
            played = list(play([seed for seed in new_seeds for _ in range(g)]))  # empty: a round for the others
            budget -= len(played)
            stats["extra_episodes"] += len(played)
            self.replacement_runs += 1
            for episode in played:  # tree node ids unique in the batch: another run restarts the numbering
                episode.tree_nodes = [f"x{self.replacement_runs}.{node}" for node in episode.tree_nodes]
            scores = [episode_score(e, self.failure_reward) for e in played]
            for k, is_flat in enumerate(zero_variance_groups(scores, g)):
                group = played[k * g : (k + 1) * g]
                if is_flat:
                    discarded.extend(group)
                    stats["extra_discarded"] += 1
                    continue
                slot = slots.pop(0)  # the first zero-variance group of the batch, in batch order
                discarded.extend(episodes[slot * g : (slot + 1) * g])
                episodes[slot * g : (slot + 1) * g] = group
                stats["replaced"] += 1
        stats["dropped"] = float(len(slots))
        batch = GroupedEpisodes(episodes)
        batch.dropped = [k // g in set(slots) for k in range(len(episodes))]
        batch.discarded, batch.stats = discarded, stats
        return batch


def mask_dropped(batch: dict[str, list[Any]], dropped: Sequence[bool]) -> dict[str, list[Any]]:
    """Take the dropped samples out of the loss: ``env_mask`` all 0 (turn samples too); mark ``zero_variance``.

    TRL multiplies its completion mask by ``env_mask``, so these tokens leave the loss, its token denominators
    (``num_items_in_batch``) and the KL term alike.

    Example:
        >>> mask_dropped({"env_mask": [[1, 0, 1], [1, 1]]}, [True, False])
        {'env_mask': [[0, 0, 0], [1, 1]], 'zero_variance': [True, False]}
        >>> mask_dropped({"env_mask": [[1], [1]], "turn_samples": [[{"env_mask": [1, 1]}], []]}, [True, False])
        {'env_mask': [[0], [1]], 'turn_samples': [[{'env_mask': [0, 0]}], []], 'zero_variance': [True, False]}
    """
    for i, drop in enumerate(dropped):
        if drop:
            batch["env_mask"][i] = [0] * len(batch["env_mask"][i])
            for row in batch.get("turn_samples", [[]] * len(dropped))[i]:
                row["env_mask"] = [0] * len(row["env_mask"])
    batch["zero_variance"] = list(dropped)
    return batch


def group_metrics(sums: Sequence[float]) -> dict[str, float]:
    """The logged ``groups/*`` figures from the step's :data:`STAT_NAMES` counts (added over processes).

    Example:
        >>> group_metrics([4, 3, 16, 2, 1, 2])["groups/zero_variance_fraction"]
        0.75
    """
    stats = dict(zip(STAT_NAMES, sums, strict=True))
    return {
        "groups/zero_variance_fraction": stats["zero_variance"] / max(1.0, stats["groups"]),
        "groups/extra_episodes": stats["extra_episodes"],
        "groups/replaced": stats["replaced"],
        "groups/dropped": stats["dropped"],
        "groups/extra_discarded": stats["extra_discarded"],
    }


class DatasetSeeds(Sequence):
    """The seeds of a map-style dataset's ``prompt`` column, read row by row when drawn (never the whole column).

    Example:
        >>> seeds = DatasetSeeds([{"prompt": "a"}, {"prompt": "b"}], to_seed=str.upper)
        >>> len(seeds), seeds[1]
        (2, 'B')
    """

    def __init__(self, dataset: Any, to_seed: Callable[[Any], str]) -> None:
        self.dataset, self.to_seed = dataset, to_seed

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        return self.to_seed(self.dataset[index]["prompt"])


def trainer_filter(trainer: Any, config: Any, to_seed: Callable[[Any], str]) -> GroupFilter | None:
    """The :class:`GroupFilter` of ``config.zero_variance`` for ``trainer`` (None for ``"keep"``).

    Replacement seeds are drawn from the trainer's train dataset, seeded by its seed and process.

    Raises:
        ConfigError: ``"resample"`` with a train dataset that cannot be indexed (an iterable dataset).
    """
    if config.zero_variance == "keep":
        return None
    draw = None
    if config.zero_variance == "resample":
        dataset = trainer.train_dataset
        if dataset is None or not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
            raise ConfigError(
                "zero_variance='resample' draws replacement seeds from the train dataset, which must be a map-style "
                f"dataset with a 'prompt' column; got {type(dataset).__name__}. Use zero_variance='filter'"
            )
        process = trainer.accelerator.process_index
        draw = SeedDraw(DatasetSeeds(dataset, to_seed), seed=f"{trainer.args.seed}/{process}")
    budget = config.max_extra_episodes
    return GroupFilter(config.zero_variance, trainer.num_generations, budget, config.failure_reward, draw)
