"""The batched multi-turn rollout engine.

Contexts of many episodes go to the generator together and env calls run concurrently, either
turn by turn or with each episode advancing on its own (``schedule``, see
:mod:`trl_env.engine.schedulers`). The token sequence grows incrementally:
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

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.core import Env, EpisodeMemory, Generator, HasTokenizer, Processor
from trl_env.engine.config import RolloutConfig
from trl_env.engine.episode_steps import EpisodeSteps
from trl_env.engine.generator_use import RolloutStats
from trl_env.engine.schedulers import play_per_episode, play_turn_synchronous
from trl_env.envpool.isolation import factory_name
from trl_env.envpool.pool import EnvPool
from trl_env.episode import Episode
from trl_env.errors import ConfigError

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


class RolloutEngine:
    """Runs batches of episodes with one generator, processor and tokenizer.

    Env calls go through an :class:`~trl_env.envpool.pool.EnvPool` (isolated workers with a
    deadline per call), kept across runs with the same factory. ``config.schedule`` picks the
    scheduler (:mod:`trl_env.engine.schedulers`); :attr:`stats` tells how the last run used the generator.

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
        self.stats = RolloutStats(self.config.schedule)
        self._pool: EnvPool | None = None

    def _env_pool(self, env_factory: Callable[[], Env]) -> EnvPool:
        """The pool for ``env_factory``: kept across runs (its workers stay warm), rebuilt for another factory.

        The pool checks the factory, chooses where its envs run (``env_isolation="auto"``) and pickles it, once.
        """
        if self._pool is not None and self._pool.env_factory is not env_factory:
            self.close()
        if self._pool is None:
            config = self.config
            self._pool = EnvPool(
                env_factory,
                isolation=config.env_isolation,
                workers=config.env_workers,
                timeout=config.env_timeout,
                reuse_envs=config.reuse_envs,
                ray_address=config.ray_address,
                ray_resources=config.ray_resources,
            )
        return self._pool

    def close(self) -> None:
        """Stop the env workers (also done when the engine is garbage collected and at exit).

        Example:
            >>> RolloutEngine(generator, processor, tokenizer).close()
        """
        if self._pool is not None:
            self._pool.close()
        self._pool = None

    def run(self, env_factory: Callable[[], Env], seeds: Sequence[str], *, progress: bool = False) -> list[Episode]:
        """Play one episode per seed; return them in seed order.

        Raises:
            TypeError: ``env_factory`` is not callable, or (``env_isolation="process"``) cannot go to a worker.
        """
        try:
            return self._run(env_factory, seeds, progress)
        except BaseException:
            self.close()  # the pool's slots of this run were not released; start the next run afresh
            raise

    def _run(self, env_factory: Callable[[], Env], seeds: Sequence[str], progress: bool) -> list[Episode]:
        config = self.config
        steps = EpisodeSteps(
            self.encoder, self.processor, self.tokenizer, config, self._env_pool(env_factory), factory_name(env_factory)
        )
        if isinstance(self.generator, EpisodeMemory):
            steps.on_end = self.generator.end_episode
        play = play_per_episode if config.schedule == "episode" else play_turn_synchronous
        self.stats = RolloutStats(config.schedule)
        start = time.perf_counter()
        episodes = play(steps, self.generator, seeds, self.stats, progress)
        self.stats.close(time.perf_counter() - start)
        self.stats.sampled_tokens = steps.sampled_tokens
        steps.collect_metrics()
        if config.check_invariants:
            for episode in episodes:
                episode.check(self.tokenizer)
        return episodes


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
        progress: show a progress bar of the episodes ended.

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
            raise ConfigError("rollout() needs tokenizer= when neither the processor nor the generator carries one")
        tokenizer = carrier.tokenizer
    engine = RolloutEngine(generator, processor, tokenizer, RolloutConfig.from_kwargs(config, **settings))
    try:
        return engine.run(env_factory, seeds, progress=progress)
    finally:
        engine.close()
