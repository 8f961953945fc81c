"""One episode in flight: its env's slot, its token context, and the per-turn history state the steps update.

:class:`LiveEpisode` is the state; :mod:`trl_env.engine.episode_steps` holds the transitions that change it.
"""

from __future__ import annotations

from copy import deepcopy
from typing import TYPE_CHECKING

from trl_env.core import HistoryRewrite
from trl_env.engine.config import RolloutConfig
from trl_env.episode import Episode, Turn

if TYPE_CHECKING:
    from trl_env.envpool.pool import EnvSlot


class LiveEpisode:
    """An episode in progress: its env's slot in the pool and the running token context.

    ``root`` is the number of the root episode it comes from (its seed's position, or its block's in a tree
    rollout) and ``path`` the branches it took at the forks so far (empty without a tree).
    """

    def __init__(self, slot: EnvSlot, episode: Episode, root: int, path: tuple[int, ...] = ()) -> None:
        self.slot = slot
        self.episode = episode
        self.root, self.path = root, path
        self.context = list(episode.prompt_ids)
        self.turn: Turn | None = None  # the turn whose env step is in flight
        self.branch_points: list[int] = []  # completion offsets of the forks so far
        self.opening = len(episode.messages)  # per-turn histories: the messages every prompt keeps
        self.start = 0  # per-turn histories: where the current conversation starts (after a history rewrite)
        self.shown = list(range(self.opening))  # per-turn histories: the messages the current prompt renders
        self.prompt_length = len(self.context)  # per-turn histories: the current turn's prompt length
        self.replaced: list[int] | None = None  # per-turn histories: the last turn's context, until the next call

    def fork(self, slot: EnvSlot, branch: int) -> LiveEpisode:
        """A copy that goes on alone as branch ``branch`` of this fork, in the env ``slot`` (a fork of this one's).

        The copy has its own deep copy of the episode (tokens, turns and, under per-turn histories, the messages
        and the turn samples so far) and the same running state: the context (the next turn's prompt), the fork
        points, and the per-turn history's opening, start, rendered messages and prompt length, so its turn
        samples render their prompts from its own conversation exactly as the original's do.

        Args:
            slot: the forked env's slot in the pool.
            branch: the branch number the copy takes at this fork (the original takes 0).

        Returns:
            The copy; this episode's ``path`` is not changed.
        """
        copy = LiveEpisode(slot, deepcopy(self.episode), self.root, (*self.path, branch))
        copy.context, copy.branch_points = list(self.context), list(self.branch_points)
        copy.opening, copy.start, copy.shown = self.opening, self.start, list(self.shown)
        copy.prompt_length = self.prompt_length
        copy.replaced = None if self.replaced is None else list(self.replaced)
        return copy

    def budget_left(self, config: RolloutConfig) -> int | float:
        """Tokens left before the context is longer than the first prompt plus ``max_completion_tokens``.

        Under ``history="full"`` the context is the first prompt and the completion, so this is the episode
        budget minus the completion; under per-turn histories it bounds every turn sample's length the same way.
        """
        if config.max_completion_tokens is None:
            return float("inf")
        return config.max_completion_tokens + len(self.episode.prompt_ids) - len(self.context)

    def turn_budget(self, config: RolloutConfig) -> int:
        """Tokens the next model turn may sample."""
        return int(min(config.max_turn_tokens, self.budget_left(config)))

    def adopt_rewrite(self, rewrite: HistoryRewrite) -> None:
        """Per-turn histories: the env's rewritten conversation becomes the current one, after the old one.

        It is appended to ``Episode.messages`` (earlier turn samples keep their message positions); the messages
        before its first assistant answer are kept by every later prompt, as the first observation was.
        """
        episode = self.episode
        self.start = len(episode.messages)
        episode.messages += [dict(m) for m in rewrite.messages]
        self.opening = next(
            (i for i, m in enumerate(rewrite.messages) if m["role"] == "assistant"), len(rewrite.messages)
        )
        record = {"turn": episode.num_turns, "start": self.start, "reason": rewrite.reason}
        if rewrite.tools is not None:  # the tools declared from here on (trl_env.engine.history.tools_in_effect)
            record["tools"] = [dict(tool) for tool in rewrite.tools]
        episode.history_rewrites.append(record)
