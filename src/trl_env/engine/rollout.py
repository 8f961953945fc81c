"""The batched multi-turn rollout engine.

Each turn, the contexts of all live episodes go to the generator in one call; the
environments of the turn then step concurrently. The token sequence grows incrementally:
sampled ids are kept verbatim (mask 1), environment chunks are tokenized on their own
(mask 0); history is never re-tokenized.

Budgets: ``max_turns`` model turns, ``max_turn_tokens`` sampled tokens per turn, and
``max_completion_tokens`` completion tokens per episode in all (TRL's
``max_completion_length``), which the output never exceeds. An environment delta longer
than ``max_env_tokens`` tokens is cut there and marked ``[... N tokens truncated]``.

How an episode ends, and its last token:

* the env says ``alive=False``, or ``max_turns`` is reached: the last token is the
  end-of-turn token (sampled, or appended with mask 0 if the turn hit ``max_turn_tokens``);
  TRL counts the sample as finished.
* the next environment chunk plus one sampled token would not fit the token budget: the
  episode stops before that chunk, after an end-of-turn token: finished.
* the budget runs out in the middle of a model turn: the last token is the last sampled one
  and the env is not stepped with the cut-off answer; TRL counts the sample as truncated.
* the environment raises or times out (``on_env_error="fail_episode"``): the episode ends
  with the error in ``Episode.error``; under a trainer it is unscorable unless ``failure_reward`` is set.

Example:
    >>> episodes = rollout(GuessEnv, ["3"], generator, processor, tokenizer=tok)
    >>> episodes[0].check(tok)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.chat.parsing import parse_turn
from trl_env.core import (
    CollectiveGenerator,
    Env,
    Generator,
    HasTokenizer,
    Processor,
)
from trl_env.engine.config import RolloutConfig
from trl_env.engine.env_calls import EnvError
from trl_env.engine.env_pool import EnvFault, EnvPool, EnvSlot
from trl_env.engine.isolation import choose_isolation, factory_name
from trl_env.episode import Episode, SegmentKind, StopReason, Turn
from trl_env.generation.base import cut_at_stop

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


class _Live:
    """An episode in progress: its env's slot in the pool and the running token context."""

    def __init__(self, slot: EnvSlot, episode: Episode) -> None:
        self.slot = slot
        self.episode = episode
        self.context = list(episode.prompt_ids)

    def budget_left(self, config: RolloutConfig) -> int | float:
        if config.max_completion_tokens is None:
            return float("inf")
        return config.max_completion_tokens - len(self.episode.completion_ids)


class RolloutEngine:
    """Runs batches of episodes with one generator, processor and tokenizer.

    Env calls go through an :class:`~trl_env.engine.env_pool.EnvPool` (isolated workers with a
    deadline per call), kept across runs with the same factory.

    Example:
        >>> engine = RolloutEngine(generator, processor, tokenizer, RolloutConfig(max_turns=2, max_turn_tokens=4))
        >>> [e.num_turns for e in engine.run(GuessNumberEnv, ["3", "9"])]
        [2, 2]
        >>> engine.close()
    """

    def __init__(
        self,
        generator: Generator,
        processor: Processor,
        tokenizer: PreTrainedTokenizerBase,
        config: RolloutConfig | None = None,
    ) -> None:
        self.generator = generator
        self.processor = processor
        self.tokenizer = tokenizer
        self.config = config or RolloutConfig()
        self.encoder = ChunkEncoder(tokenizer, processor)
        self._pool: EnvPool | None = None
        self._pool_factory: Callable[[], Env] | None = None
        self._releases: list[tuple[Episode, Future]] = []

    def _env_pool(self, env_factory: Callable[[], Env]) -> EnvPool:
        """The pool for ``env_factory``: kept across runs (its workers stay warm), rebuilt for another factory."""
        if self._pool is not None and self._pool_factory is not env_factory:
            self.close()
        if self._pool is None:
            config = self.config
            self._pool = EnvPool(
                env_factory,
                isolation=choose_isolation(env_factory, config.env_isolation),
                workers=config.env_workers,
                timeout=config.env_timeout,
                reuse_envs=config.reuse_envs,
            )
            self._pool_factory = env_factory
        return self._pool

    def close(self) -> None:
        """Stop the env workers (also done when the engine is garbage collected and at exit).

        Example:
            >>> RolloutEngine(generator, processor, tokenizer).close()
        """
        if self._pool is not None:
            self._pool.close()
        self._pool = self._pool_factory = None

    def run(self, env_factory: Callable[[], Env], seeds: Sequence[str], *, progress: bool = False) -> list[Episode]:
        """Play one episode per seed, all batched together; return them in seed order."""
        if not callable(env_factory):
            raise TypeError(f"env_factory must be a class or function that makes a new env, got {env_factory!r}")
        try:
            return self._run(env_factory, seeds, progress)
        except BaseException:
            self.close()  # the pool's slots of this run were not released; start the next run afresh
            raise

    def _run(self, env_factory: Callable[[], Env], seeds: Sequence[str], progress: bool) -> list[Episode]:
        config = self.config
        pool = self._env_pool(env_factory)
        self._name = factory_name(env_factory)
        self._releases = []
        started = [pool.reset(seed) for seed in seeds]
        episodes: list[Episode] = []
        live: list[_Live] = []
        for seed, (slot, future) in zip(seeds, started, strict=True):
            result = future.result()
            if isinstance(result, EnvFault):  # a valid (empty) prompt keeps the sample usable for TRL
                prompt_ids, prompt_text = self.encoder.prompt(config.system_prompt, "")
                episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text)
                episodes.append(episode)
                self._fail(episode, slot, result, turn=0)
                continue
            delta = self.encoder.truncate(result.delta, config.max_env_tokens)
            prompt_ids, prompt_text = self.encoder.prompt(config.system_prompt, delta, result.tools)
            episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text, reward=result.reward)
            episodes.append(episode)
            live.append(_Live(slot, episode))
        bar = tqdm(total=config.max_turns, desc="rollout turns", disable=not progress, leave=False)
        while self._continue(bool(live)):
            live = self._turn(live, pool)
            bar.update(1)
        bar.close()
        for episode, release in self._releases:  # metrics() and close() ran in the workers, concurrently
            metrics = release.result()
            if metrics is not None and not episode.failed:
                episode.metrics = metrics
        self._releases = []
        if config.check_invariants:
            for episode in episodes:
                episode.check(self.tokenizer)
        return episodes

    def _continue(self, has_live: bool) -> bool:
        """Whether to play another turn. With a :class:`~trl_env.core.CollectiveGenerator` (TRL's vLLM
        server mode), a process with no live episodes keeps calling ``generate([])`` in step."""
        if isinstance(self.generator, CollectiveGenerator):
            return self.generator.any_rank_live(has_live)
        return has_live

    def _turn(self, live: list[_Live], pool: EnvPool) -> list[_Live]:
        config = self.config
        budgets = [min(config.max_turn_tokens, run.budget_left(config)) for run in live]
        generations = self.generator.generate([run.context for run in live], int(max(budgets, default=1)))
        if len(generations) != len(live):
            raise RuntimeError(f"generator returned {len(generations)} results for {len(live)} contexts")
        stepping: list[tuple[_Live, Turn]] = []
        for run, budget, generation in zip(live, budgets, generations, strict=True):
            ids, logprobs = cut_at_stop(*generation, stop_token_ids=[self.encoder.turn_end_id])
            ids, logprobs = ids[: int(budget)], logprobs[: int(budget)]
            stopped = bool(ids) and ids[-1] == self.encoder.turn_end_id
            text = self.tokenizer.decode(ids, clean_up_tokenization_spaces=False)
            start = len(run.episode.completion_ids)
            run.episode.add_model_tokens(ids, logprobs, text)
            run.context.extend(ids)
            body = self.tokenizer.decode(ids[:-1] if stopped else ids, clean_up_tokenization_spaces=False)
            parsed = parse_turn(self.processor, body)
            span = (start, start + len(ids))
            turn = Turn(body, parsed.reasoning, parsed.action, parsed.ok and bool(body.strip()), stopped, span=span)
            run.episode.turns.append(turn)
            if not stopped:
                if run.budget_left(config) < 1:
                    self._finish(run, StopReason.TOKEN_BUDGET)
                    continue
                close = [self.encoder.turn_end_id]
                run.episode.add_env_tokens(close, self.encoder.turn_end, SegmentKind.TURN_END)
                run.context.extend(close)
            stepping.append((run, turn))
        futures = [pool.step(run.slot, turn.action) for run, turn in stepping]  # all envs step concurrently
        still_live: list[_Live] = []
        for (run, turn), future in zip(stepping, futures, strict=True):
            result = future.result()
            if isinstance(result, EnvFault):
                self._fail(run.episode, run.slot, result, turn=run.episode.num_turns)
                continue
            delta = self.encoder.truncate(result.delta, config.max_env_tokens)
            turn.observation = delta
            turn.reward = result.reward - run.episode.reward
            run.episode.reward = result.reward
            if not result.alive:
                self._finish(run, StopReason.DONE)
            elif run.episode.num_turns >= config.max_turns:
                self._finish(run, StopReason.MAX_TURNS)
            else:
                ids, text = self.encoder.env_turn(delta, result.tool_results, close_turn=False)
                if len(ids) + 1 > run.budget_left(config):
                    self._finish(run, StopReason.TOKEN_BUDGET)
                    continue
                run.episode.add_env_tokens(ids, text)
                run.context.extend(ids)
                still_live.append(run)
        return still_live

    def _finish(self, run: _Live, reason: StopReason) -> None:
        run.episode.stop_reason = reason
        self._releases.append((run.episode, self._pool.release(run.slot)))

    def _fail(self, episode: Episode, slot: EnvSlot, fault: EnvFault, *, turn: int) -> None:
        message = f"{self._name} (seed={episode.seed!r}, turn={turn}): {fault.kind}: {fault.message}"
        release = self._pool.release(slot)  # close() where the env is still reachable
        if self.config.on_env_error == "raise":
            raise EnvError(message)
        episode.stop_reason = StopReason.ENV_ERROR
        episode.error = message
        if self.config.failure_reward is not None:
            episode.reward = self.config.failure_reward  # else: the last reward seen, for the record only
        self._releases.append((episode, release))


def rollout(
    env_factory: Callable[[], Env],
    seeds: Sequence[str],
    generator: Generator,
    processor: Processor,
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    config: RolloutConfig | None = None,
    progress: bool = False,
    **settings: Any,
) -> list[Episode]:
    """Play one episode per seed without a trainer (evaluation, debugging).

    Args:
        env_factory: makes a fresh env per episode (an env class, or a function).
        seeds: one episode per seed, returned in this order.
        generator: the sampling backend.
        processor: the chat format.
        tokenizer: defaults to the processor's or the generator's (:class:`~trl_env.core.HasTokenizer`).
        config: budgets and policies; ``settings`` (:class:`RolloutConfig` field names) override it.
        progress: show a progress bar over turns.

    Returns:
        The finished episodes.

    Example:
        >>> episodes = rollout(GuessEnv, ["3", "9"], generator, processor, max_turns=4, max_turn_tokens=4)
        >>> [e.seed for e in episodes], all(e.num_turns <= 4 for e in episodes)
        (['3', '9'], True)
    """
    if tokenizer is None:
        carrier = next((obj for obj in (processor, generator) if isinstance(obj, HasTokenizer)), None)
        if carrier is None:
            raise ValueError("rollout() needs tokenizer= when neither the processor nor the generator carries one")
        tokenizer = carrier.tokenizer
    engine = RolloutEngine(generator, processor, tokenizer, RolloutConfig.from_kwargs(config, **settings))
    try:
        return engine.run(env_factory, seeds, progress=progress)
    finally:
        engine.close()
