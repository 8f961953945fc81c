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
  with ``failure_reward`` and the error in ``Episode.error``.

Example:
    >>> episodes = rollout(GuessEnv, ["3"], generator, processor, tokenizer=tok)  # doctest: +SKIP
    >>> episodes[0].check(tok)  # doctest: +SKIP
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tqdm.auto import tqdm

from trl_env.chat.chunk_encoder import ChunkEncoder
from trl_env.core import (
    Closable,
    CollectiveGenerator,
    Env,
    Generator,
    HasTokenizer,
    ParsedOutput,
    Processor,
    ReportsMetrics,
    StrictParser,
    metrics_of,
)
from trl_env.engine.config import RolloutConfig
from trl_env.engine.env_calls import EnvCaller, EnvError, EnvFault
from trl_env.episode import Episode, SegmentKind, StopReason, Turn
from trl_env.generation.base import cut_at_stop

if TYPE_CHECKING:  # a type only: importing transformers here would slow `import trl_env` down
    from transformers import PreTrainedTokenizerBase


class _Live:
    """An episode in progress: its env and the running token context."""

    def __init__(self, env: Env, episode: Episode) -> None:
        self.env = env
        self.episode = episode
        self.context = list(episode.prompt_ids)

    def budget_left(self, config: RolloutConfig) -> int | float:
        if config.max_completion_tokens is None:
            return float("inf")
        return config.max_completion_tokens - len(self.episode.completion_ids)


def parse_turn(processor: Processor, completion: str) -> ParsedOutput:
    """Parse one model turn: the processor's own :meth:`~trl_env.core.StrictParser.parse` when it has one;
    otherwise ``parse_agent_output``, with an empty action counted as a parse failure.

    Example:
        >>> class Plain:
        ...     def parse_agent_output(self, completion):
        ...         return "", completion.strip()
        >>> parse_turn(Plain(), "  "), parse_turn(Plain(), "7")
        (ParsedOutput(reasoning='', action='', ok=False), ParsedOutput(reasoning='', action='7', ok=True))
    """
    if isinstance(processor, StrictParser):
        return processor.parse(completion)
    reasoning, action = processor.parse_agent_output(completion)
    return ParsedOutput(reasoning, action, bool(action.strip()))


class RolloutEngine:
    """Runs batches of episodes with one generator, processor and tokenizer.

    Example:
        >>> engine = RolloutEngine(generator, processor, tok, RolloutConfig(max_turns=3))  # doctest: +SKIP
        >>> episodes = engine.run(MyEnv, ["seed-1", "seed-2"])  # doctest: +SKIP
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
        self._caller: EnvCaller | None = None
        self._ended: list[tuple[Env, Episode]] = []  # ended episodes whose envs still get metrics()/close()
        self._close_caller: weakref.finalize | None = None

    def _env_caller(self) -> EnvCaller:
        """The env thread pool, kept across runs (starting threads is a large part of a short rollout's
        overhead) unless a run ended with an error or abandoned a timed-out call."""
        config = self.config
        if self._caller is not None and self._caller.workers != max(1, config.env_workers):
            self.close()
        if self._caller is None:
            self._caller = EnvCaller(workers=config.env_workers, timeout=config.env_timeout)
            self._close_caller = weakref.finalize(self, self._caller.close)
        self._caller.timeout = config.env_timeout
        return self._caller

    def close(self) -> None:
        """Shut the env thread pool down (it is also shut down when the engine is garbage collected).

        Example:
            >>> engine.close()  # doctest: +SKIP
        """
        if self._close_caller is not None:
            self._close_caller()  # runs EnvCaller.close once and unregisters it
        self._caller = self._close_caller = None

    def run(self, env_factory: Callable[[], Env], seeds: Sequence[str], *, progress: bool = False) -> list[Episode]:
        """Play one episode per seed, all batched together; return them in seed order."""
        config = self.config
        caller = self._env_caller()
        reusable = False
        try:
            envs = [env_factory() for _ in seeds]
            envs = [self._checked_env(env, env_factory) for env in envs]
            results = caller.reset_all(list(zip(envs, seeds, strict=True)))
            episodes: list[Episode] = []
            live: list[_Live] = []
            for env, seed, result in zip(envs, seeds, results, strict=True):
                if isinstance(result, EnvFault):  # a valid (empty) prompt keeps the sample usable for TRL
                    prompt_ids, prompt_text = self.encoder.prompt(config.system_prompt, "")
                    episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text)
                    self._fail(episode, env, result, turn=0)
                    episodes.append(episode)
                    continue
                new_env, delta = result
                delta = self.encoder.truncate(delta, config.max_env_tokens)
                prompt_ids, prompt_text = self.encoder.prompt(config.system_prompt, delta)
                episode = Episode(seed=seed, prompt_ids=prompt_ids, prompt_text=prompt_text)
                episodes.append(episode)
                live.append(_Live(new_env, episode))
            bar = tqdm(total=config.max_turns, desc="rollout turns", disable=not progress, leave=False)
            while self._continue(bool(live)):
                live = self._turn(live, caller)
                bar.update(1)
            bar.close()
            self._end_envs(caller)
            reusable = not caller.abandoned
        finally:
            if not reusable:
                self.close()
        if config.check_invariants:
            for episode in episodes:
                episode.check(self.tokenizer)
        return episodes

    @staticmethod
    def _checked_env(env: Any, env_factory: Callable[[], Env]) -> Env:
        # reward and alive may first be set by reset(), so only the methods are checked here
        if not (callable(getattr(env, "reset", None)) and callable(getattr(env, "step", None))):
            name = getattr(env_factory, "__qualname__", repr(env_factory))
            raise TypeError(
                f"the env factory {name} returned {type(env).__name__}, not an env (an object with reward, alive, "
                "reset(seed) and step(action)); pass the env class or a function that returns a new env"
            )
        return env

    def _continue(self, has_live: bool) -> bool:
        """Whether to play another turn. With a :class:`~trl_env.core.CollectiveGenerator` (TRL's vLLM
        server mode), a process with no live episodes keeps calling ``generate([])`` in step."""
        if isinstance(self.generator, CollectiveGenerator):
            return self.generator.any_rank_live(has_live)
        return has_live

    def _end_envs(self, caller: EnvCaller) -> None:
        """Read each ended env's ``metrics()`` and call its ``close()``; a fault there fails the episode."""
        ended, self._ended = self._ended, []
        with_metrics = [(env, ep) for env, ep in ended if not ep.failed and isinstance(env, ReportsMetrics)]
        results = caller.run_all([lambda env=env: metrics_of(env) for env, _ in with_metrics], "metrics")
        for (env, episode), result in zip(with_metrics, results, strict=True):
            if isinstance(result, EnvFault):
                self._fail(episode, env, result, turn=episode.num_turns)
            else:
                episode.metrics = result
        closable = [(env, episode) for env, episode in ended if isinstance(env, Closable)]
        results = caller.run_all([env.close for env, _ in closable], "close")
        for (env, episode), result in zip(closable, results, strict=True):
            if isinstance(result, EnvFault) and not episode.failed:
                self._fail(episode, env, result, turn=episode.num_turns)

    def _turn(self, live: list[_Live], caller: EnvCaller) -> list[_Live]:
        config = self.config
        budgets = [min(config.max_turn_tokens, run.budget_left(config)) for run in live]
        generations = self.generator.generate([run.context for run in live], max(budgets, default=1))
        if len(generations) != len(live):
            raise RuntimeError(f"generator returned {len(generations)} results for {len(live)} contexts")
        stepping: list[tuple[_Live, Turn]] = []
        for run, budget, generation in zip(live, budgets, generations, strict=True):
            ids, logprobs = cut_at_stop(*generation, stop_token_ids=[self.encoder.turn_end_id])
            ids, logprobs = ids[:budget], logprobs[:budget]
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
        results = caller.step_all([(run.env, turn.action, run.episode.seed) for run, turn in stepping])
        still_live: list[_Live] = []
        for (run, turn), result in zip(stepping, results, strict=True):
            if isinstance(result, EnvFault):
                self._fail(run.episode, run.env, result, turn=run.episode.num_turns)
                continue
            run.env, delta = result
            delta = self.encoder.truncate(delta, config.max_env_tokens)
            turn.observation = delta
            reward = float(run.env.reward)
            turn.reward = reward - run.episode.reward
            run.episode.reward = reward
            if not run.env.alive:
                self._finish(run, StopReason.DONE)
            elif run.episode.num_turns >= config.max_turns:
                self._finish(run, StopReason.MAX_TURNS)
            else:
                ids, text = self.encoder.user_turn(delta, close_turn=False)
                if len(ids) + 1 > run.budget_left(config):
                    self._finish(run, StopReason.TOKEN_BUDGET)
                    continue
                run.episode.add_env_tokens(ids, text)
                run.context.extend(ids)
                still_live.append(run)
        return still_live

    def _finish(self, run: _Live, reason: StopReason) -> None:
        run.episode.stop_reason = reason
        run.episode.reward = float(run.env.reward)
        self._ended.append((run.env, run.episode))

    def _fail(self, episode: Episode, env: object, fault: EnvFault, *, turn: int) -> None:
        message = fault.describe(env, episode.seed, turn)
        if self.config.on_env_error == "raise":
            raise EnvError(message)
        already_failed = episode.failed
        episode.stop_reason = StopReason.ENV_ERROR
        episode.error = message
        episode.reward = self.config.failure_reward
        if fault.kind != "timeout" and not already_failed and isinstance(env, Env):
            self._ended.append((env, episode))  # still reachable: it gets close(), never metrics()


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
        >>> episodes = rollout(GuessEnv, ["3", "9"], generator, processor, max_turns=4)  # doctest: +SKIP
        >>> [e.reward for e in episodes]  # doctest: +SKIP
        [1.0, 0.0]
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
