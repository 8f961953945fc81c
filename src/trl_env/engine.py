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

import math
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tqdm.auto import tqdm
from transformers import PreTrainedTokenizerBase

from trl_env.chunk_encoder import ChunkEncoder
from trl_env.core import Env, Processor
from trl_env.env_calls import EnvCaller, EnvError, EnvFault, OnEnvError
from trl_env.episode import Episode, Turn
from trl_env.generator import Generator
from trl_env.parsing import ParsedOutput


@dataclass
class RolloutConfig:
    """Budgets and policies of a rollout."""

    system_prompt: str = ""
    max_turns: int = 8
    max_turn_tokens: int = 256
    max_completion_tokens: int = 1024
    max_env_tokens: int = 2048
    env_workers: int = 16
    env_timeout: float | None = 60.0
    on_env_error: OnEnvError = "fail_episode"
    failure_reward: float = 0.0
    check_invariants: bool = True

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_turn_tokens", "max_completion_tokens", "max_env_tokens", "env_workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"RolloutConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.on_env_error not in ("fail_episode", "raise"):
            raise ValueError(f"on_env_error must be 'fail_episode' or 'raise', got {self.on_env_error!r}")
        if not math.isfinite(self.failure_reward):
            raise ValueError(f"failure_reward must be finite, got {self.failure_reward}")


class _Live:
    """An episode in progress: its env and the running token context."""

    def __init__(self, env: Env, episode: Episode) -> None:
        self.env = env
        self.episode = episode
        self.context = list(episode.prompt_ids)

    def budget_left(self, config: RolloutConfig) -> int:
        return config.max_completion_tokens - len(self.episode.completion_ids)


def _parse(processor: Processor, completion: str) -> ParsedOutput:
    parse = getattr(processor, "parse", None)
    if parse is not None:
        return parse(completion)
    reasoning, action = processor.parse_agent_output(completion)
    return ParsedOutput(reasoning, action, True)


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
            results = caller.call_all([(env, "reset", seed, seed) for env, seed in zip(envs, seeds, strict=True)])
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
            reusable = not caller.abandoned
        finally:
            if not reusable:
                self.close()
        if config.check_invariants:
            for episode in episodes:
                episode.check(self.tokenizer)
        return episodes

    def _continue(self, has_live: bool) -> bool:
        """Whether to play another turn. A generator whose ``generate`` is a collective call
        across processes (TRL's vLLM server mode) provides ``any_rank_live(has_live)``, so
        that a process with no live episodes keeps calling ``generate([])`` in step."""
        any_rank_live = getattr(self.generator, "any_rank_live", None)
        return any_rank_live(has_live) if any_rank_live is not None else has_live

    def _turn(self, live: list[_Live], caller: EnvCaller) -> list[_Live]:
        config = self.config
        budgets = [min(config.max_turn_tokens, run.budget_left(config)) for run in live]
        generations = self.generator.generate([run.context for run in live], max(budgets, default=1))
        if len(generations) != len(live):
            raise RuntimeError(f"generator returned {len(generations)} results for {len(live)} contexts")
        stepping: list[tuple[_Live, Turn]] = []
        for run, budget, generation in zip(live, budgets, generations, strict=True):
            ids, logprobs = self._cut(generation, budget)
            stopped = bool(ids) and ids[-1] == self.encoder.turn_end_id
            text = self.tokenizer.decode(ids, clean_up_tokenization_spaces=False)
            run.episode.add_model_tokens(ids, logprobs, text)
            run.context.extend(ids)
            body = self.tokenizer.decode(ids[:-1] if stopped else ids, clean_up_tokenization_spaces=False)
            parsed = _parse(self.processor, body)
            turn = Turn(body, parsed.reasoning, parsed.action, parsed.ok and bool(body.strip()), stopped)
            run.episode.turns.append(turn)
            if not stopped:
                if run.budget_left(config) < 1:
                    self._finish(run, "token_budget")
                    continue
                close = [self.encoder.turn_end_id]
                run.episode.add_env_tokens(close, self.encoder.turn_end)
                run.context.extend(close)
            stepping.append((run, turn))
        results = caller.call_all([(run.env, "step", turn.action, run.episode.seed) for run, turn in stepping])
        still_live: list[_Live] = []
        for (run, turn), result in zip(stepping, results, strict=True):
            if isinstance(result, EnvFault):
                self._fail(run.episode, run.env, result, turn=run.episode.num_turns)
                continue
            run.env, delta = result
            delta = self.encoder.truncate(delta, config.max_env_tokens)
            turn.observation = delta
            run.episode.reward = float(run.env.reward)
            if not run.env.alive:
                self._finish(run, "done")
            elif run.episode.num_turns >= config.max_turns:
                self._finish(run, "max_turns")
            else:
                ids, text = self.encoder.user_turn(delta, close_turn=False)
                if len(ids) + 1 > run.budget_left(config):
                    self._finish(run, "token_budget")
                    continue
                run.episode.add_env_tokens(ids, text)
                run.context.extend(ids)
                still_live.append(run)
        return still_live

    def _cut(self, generation: tuple[list[int], list[float]], budget: int) -> tuple[list[int], list[float]]:
        ids, logprobs = list(generation[0]), list(generation[1])
        if len(ids) != len(logprobs):
            raise RuntimeError(f"generator returned {len(ids)} ids but {len(logprobs)} logprobs")
        if self.encoder.turn_end_id in ids:
            end = ids.index(self.encoder.turn_end_id) + 1
            ids, logprobs = ids[:end], logprobs[:end]
        return ids[:budget], logprobs[:budget]

    def _finish(self, run: _Live, reason: str) -> None:
        run.episode.stop_reason = reason
        run.episode.reward = float(run.env.reward)

    def _fail(self, episode: Episode, env: object, fault: EnvFault, *, turn: int) -> None:
        message = fault.describe(env, episode.seed, turn)
        if self.config.on_env_error == "raise":
            raise EnvError(message)
        episode.stop_reason = "env_error"
        episode.error = message
        episode.reward = self.config.failure_reward


def rollout(
    env_factory: Callable[[], Env],
    seeds: Sequence[str],
    generator: Generator,
    processor: Processor,
    *,
    tokenizer: PreTrainedTokenizerBase | None = None,
    progress: bool = False,
    **config: object,
) -> list[Episode]:
    """Play one episode per seed without a trainer (evaluation, debugging).

    ``tokenizer`` defaults to ``processor.tokenizer`` or ``generator.tokenizer``; keyword
    arguments are :class:`RolloutConfig` fields.

    Example:
        >>> episodes = rollout(GuessEnv, ["3", "9"], generator, processor, max_turns=4)  # doctest: +SKIP
        >>> [e.reward for e in episodes]  # doctest: +SKIP
        [1.0, 0.0]
    """
    tokenizer = tokenizer or getattr(processor, "tokenizer", None) or getattr(generator, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("rollout() needs tokenizer= when neither the processor nor the generator carries one")
    engine = RolloutEngine(generator, processor, tokenizer, RolloutConfig(**config))  # type: ignore[arg-type]
    return engine.run(env_factory, seeds, progress=progress)
