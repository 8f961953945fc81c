"""What happens to one episode between generator calls and env calls, whatever the schedule.

A rollout alternates two events per episode: the generator answers (:meth:`EpisodeSteps.after_generation`)
and the env answers (:meth:`EpisodeSteps.after_reply`). Both schedulers of
:mod:`trl_env.engine.schedulers` (turn-synchronous and per-episode) drive the same transitions, so an
episode's tokens, budgets, faults and metrics do not depend on the schedule.

Example:
    >>> from trl_env.envpool.pool import EnvPool
    >>> from trl_env.chat.chunk_encoder import ChunkEncoder
    >>> pool = EnvPool(GuessNumberEnv, isolation="thread", workers=1)
    >>> steps = EpisodeSteps(ChunkEncoder(tokenizer, processor), processor, tokenizer, RolloutConfig(), pool, "Guess")
    >>> slot, reply = pool.reset("3")
    >>> run = steps.start(0, "3", slot, reply.result())
    >>> run.episode.num_turns, run.context == run.episode.prompt_ids
    (0, True)
    >>> pool.close()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.chat.chunked_processor import ChunkedProcessor
from trl_env.chat.parsing import parse_turn
from trl_env.core import Generation, HistoryRewrite, Processor, ToolResult
from trl_env.engine.config import RolloutConfig
from trl_env.engine.fault_policy import EnvError
from trl_env.engine.history import TemplateHistory, tools_in_effect
from trl_env.engine.live_episode import LiveEpisode
from trl_env.engine.tree import leaf_copies, root_seeds
from trl_env.envpool.pool import EnvFault, EnvPool, EnvReply, EnvSlot
from trl_env.episode import Episode, SegmentKind, StopReason, Turn, TurnSample
from trl_env.generation.base import cut_at_stop

NO_SPLIT = (
    "starting a new sample from the rewritten conversation (on_history_rewrite='split') needs "
    "RolloutConfig.history='template' or 'window': under 'full' an episode is one token sequence"
)

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


class EpisodeSteps:
    """The transitions of one episode, shared by every scheduler.

    Args:
        encoder: renders env text into token chunks.
        processor: the chat format (parses answers).
        tokenizer: decodes sampled ids.
        config: budgets and policies.
        pool: the env pool the episodes' slots belong to.
        env_name: the env's name, for error messages.
    """

    def __init__(
        self,
        encoder: ChunkEncoder,
        processor: Processor,
        tokenizer: PreTrainedTokenizerBase,
        config: RolloutConfig,
        pool: EnvPool,
        env_name: str,
    ) -> None:
        self.encoder, self.processor, self.tokenizer = encoder, processor, tokenizer
        self.config, self.pool, self.env_name = config, pool, env_name
        self.releases: list[tuple[Episode, Future]] = []  # metrics() and close() running in the workers
        self.finished: list[Episode] = []  # in the order they ended
        self.results: dict[int, Episode] = {}  # output position -> ended episode
        self.forks: list[Future] = []  # replies of EnvPool.fork: a fault shows in the branch's next step
        self.sampled_tokens = 0
        self.on_end: Callable[[list[int]], None] | None = None  # told each ended episode's last context
        self.history: TemplateHistory | None = None
        if config.per_turn:
            chunked = isinstance(processor, ChunkedProcessor)
            window = config.history_window if config.history == "window" else None
            self.history = TemplateHistory(
                tokenizer,
                window=window,
                template_kwargs=processor.template_kwargs if chunked else {},
                answer_prefix=processor.answer_prefix if chunked else "",
            )

    @property
    def leaves_per_root(self) -> int:
        """Episodes each root yields: 1, or the tree's leaves per root."""
        return self.config.tree.leaves_per_root if self.config.tree else 1

    def roots(self, seeds: Sequence[str]) -> list[str]:
        """The seeds of the root episodes: every seed, or with a tree one per block of equal seeds."""
        return root_seeds(self.config.tree, seeds)

    def outputs(self, count: int) -> list[Episode]:
        """The ended episodes in output order (seed order)."""
        return [self.results[position] for position in range(count)]

    def start(self, root: int, seed: str, slot: EnvSlot, reply: EnvReply | EnvFault) -> LiveEpisode | None:
        """Build root episode ``root`` from its reset reply: its live state, None when the reset failed."""
        config = self.config
        if isinstance(reply, EnvFault):  # a valid (empty) prompt keeps the sample usable for TRL
            prompt_ids, prompt_text = self.encoder.prompt(config.system_prompt, "")
            episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text)
            self.fail(episode, slot, reply, turn=0, root=root)
            return None
        delta = self.encoder.truncate(reply.delta, config.max_env_tokens)
        system_prompt = config.system_prompt if reply.system_prompt is None else reply.system_prompt
        if self.history is not None:
            messages = self.history.opening(system_prompt, delta)
            prompt_ids = self.history.prompt_ids(messages, range(len(messages)), reply.tools)
            prompt_text = self.history.render(messages, reply.tools, generation=True)
            episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text, reward=reply.reward)
            episode.messages, episode.tools = messages, list(reply.tools)
            return LiveEpisode(slot, episode, root)
        prompt_ids, prompt_text = self.encoder.prompt(system_prompt, delta, reply.tools)
        episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text, reward=reply.reward)
        return LiveEpisode(slot, episode, root)

    def branch(self, run: LiveEpisode) -> list[LiveEpisode]:
        """``run`` and, at a branch turn of the tree, its forks: copies of its episode and env that go on alone.

        The copies' env forks are in flight (:attr:`forks`); each copy's next step is ordered after its fork.
        """
        tree = self.config.tree
        width = tree.branches_after(run.episode.num_turns) if tree else 1
        if width == 1 or len(run.path) == len(tree.fanouts):
            return [run]
        run.branch_points.append(len(run.episode.completion_ids))
        runs = [run]
        for branch in range(1, width):
            slot, forked = self.pool.fork(run.slot)
            self.forks.append(forked)
            runs.append(run.fork(slot, branch))
        run.path = (*run.path, 0)
        return runs

    def after_generation(self, run: LiveEpisode, generation: Generation | tuple[list[int], list[float]]) -> bool:
        """Record a model turn; True when the env must now be stepped with its action (``run.turn``)."""
        config, encoder = self.config, self.encoder
        ids, logprobs = cut_at_stop(*generation, stop_token_ids=[encoder.turn_end_id])
        budget = run.turn_budget(config)
        ids, logprobs = ids[:budget], logprobs[:budget]
        self.sampled_tokens += len(ids)
        if run.replaced is not None and self.on_end is not None:  # its keys and values served this call: drop them
            self.on_end(run.replaced)
        run.replaced = None
        stopped = bool(ids) and ids[-1] == encoder.turn_end_id
        text = self.tokenizer.decode(ids, clean_up_tokenization_spaces=False)
        start = len(run.episode.completion_ids)
        run.episode.add_model_tokens(ids, logprobs, text)
        run.context.extend(ids)
        body = self.tokenizer.decode(ids[:-1] if stopped else ids, clean_up_tokenization_spaces=False)
        parsed = parse_turn(self.processor, body)
        span = (start, start + len(ids))
        turn = Turn(body, parsed.reasoning, parsed.action, parsed.ok and bool(body.strip()), stopped, span=span)
        run.episode.turns.append(turn)
        sample = None
        if self.history is not None:  # the turn is its own sample: the prompt it was sampled from, its ids
            sample = TurnSample(
                run.episode.num_turns - 1, run.context[: run.prompt_length], list(ids), list(logprobs),
                [1] * len(ids), list(run.shown),
            )  # fmt: skip
            run.episode.turn_samples.append(sample)
            run.episode.messages.append({"role": "assistant", "content": self.history.answer_prefix + body})
        if not stopped:
            if run.budget_left(config) < 1:
                self.finish(run, StopReason.TOKEN_BUDGET)
                return False
            close = [encoder.turn_end_id]
            run.episode.add_env_tokens(close, encoder.turn_end, SegmentKind.TURN_END)
            run.context.extend(close)
            if sample is not None:
                sample.completion_ids.append(encoder.turn_end_id)
                sample.logprobs.append(0.0)
                sample.env_mask.append(0)
        run.turn = turn
        return True

    def after_reply(self, run: LiveEpisode, reply: EnvReply | EnvFault) -> bool:
        """Record the env's answer to ``run.turn``; True while the episode goes on (its context is ready)."""
        config, turn = self.config, run.turn
        assert turn is not None, "after_reply without a turn in flight"
        run.turn = None
        if isinstance(reply, EnvFault):
            if self.on_end is not None:
                self.on_end(run.context)
            self.fail(run.episode, run.slot, reply, turn=run.episode.num_turns, root=run.root, run=run)
            return False
        delta = self.encoder.truncate(reply.delta, config.max_env_tokens)
        # each tool result is env text too: cut like a delta (a tool can print a whole file)
        results = [
            ToolResult(r.name, self.encoder.truncate(r.content, config.max_env_tokens)) for r in reply.tool_results
        ]
        turn.observation = delta
        turn.reward = reply.reward - run.episode.reward
        run.episode.reward = reply.reward
        if not reply.alive:
            self.finish(run, StopReason.DONE)
            return False
        if run.episode.num_turns >= config.max_turns:
            self.finish(run, StopReason.MAX_TURNS)
            return False
        if reply.history_rewrite is not None and self.history is None:
            fault = EnvFault("exception", f"HistoryError: {reply.history_rewrite.reason}; {NO_SPLIT}")
            self.fail(run.episode, run.slot, fault, turn=run.episode.num_turns, root=run.root, run=run)
            return False
        if self.history is not None:
            return self._next_prompt(run, delta, results, reply.history_rewrite)
        ids, text = self.encoder.env_turn(delta, results, close_turn=False)
        if len(ids) + 1 > run.budget_left(config):
            self.finish(run, StopReason.TOKEN_BUDGET)
            return False
        run.episode.add_env_tokens(ids, text, SegmentKind.TOOL if results else SegmentKind.ENV)
        run.context.extend(ids)
        return True

    def _next_prompt(
        self, run: LiveEpisode, delta: str, results: list[ToolResult], rewrite: HistoryRewrite | None
    ) -> bool:
        """Per-turn histories: render the next turn's prompt; True when it fits the budget with a sampled token.

        After a history rewrite the prompt renders the env's new conversation alone: it is appended to
        ``Episode.messages`` (the earlier turn samples keep their message positions) and later turns extend it.
        """
        assert self.history is not None
        episode = run.episode
        if rewrite is None:
            episode.messages += self.history.answer(delta, results)
        else:
            run.adopt_rewrite(rewrite)
        current = episode.messages[run.start :]
        shown = [run.start + i for i in self.history.indices(current, run.opening)]
        prompt = self.history.prompt_ids(episode.messages, shown, tools_in_effect(episode))
        budget = self.config.max_completion_tokens
        if budget is not None and len(prompt) + 1 > budget + len(episode.prompt_ids):
            self.finish(run, StopReason.TOKEN_BUDGET)
            return False
        run.replaced = run.context  # kept for the next call, which may reuse its start (kv cache)
        run.context, run.shown, run.prompt_length = prompt, shown, len(prompt)
        return True

    def finish(self, run: LiveEpisode, reason: StopReason) -> None:
        if self.on_end is not None:
            self.on_end(run.context)
            if run.replaced is not None:
                self.on_end(run.replaced)
        if self.history is not None:  # the transcript: the whole conversation as the template renders it
            run.episode.history_text = self.history.transcript(run.episode)
        run.episode.stop_reason = reason
        self.releases.append((run.episode, self.pool.release(run.slot)))
        self.finished.append(run.episode)
        self._place(run.episode, run.root, run.path, run.branch_points)

    def fail(
        self, episode: Episode, slot: EnvSlot, fault: EnvFault, *, turn: int, root: int, run: LiveEpisode | None = None
    ) -> None:
        message = f"{self.env_name} (seed={episode.seed!r}, turn={turn}): {fault.kind}: {fault.message}"
        release = self.pool.release(slot)  # close() where the env is still reachable
        if self.config.on_env_error == "raise":
            raise EnvError(message)
        episode.stop_reason = StopReason.ENV_ERROR
        episode.error = message
        if self.config.failure_reward is not None:
            episode.reward = self.config.failure_reward  # else: the last reward seen, for the record only
        self.releases.append((episode, release))
        self.finished.append(episode)
        self._place(episode, root, run.path if run else (), run.branch_points if run else [])

    def _place(self, episode: Episode, root: int, path: tuple[int, ...], branch_points: list[int]) -> None:
        """Put an ended episode at its output position; in a tree, once per leaf it stands for (:func:`leaf_copies`)."""
        tree = self.config.tree
        if tree is None:
            self.results[root] = episode
            return
        for position, leaf in leaf_copies(tree, episode, root, path, branch_points):
            self.results[position] = leaf

    def collect_metrics(self) -> None:
        """Wait for the released envs' ``metrics()`` (they ran in the workers, concurrently) and record them."""
        for episode, release in self.releases:
            metrics = release.result()
            if metrics is not None and not episode.failed:
                episode.metrics = metrics
        self.releases = []
