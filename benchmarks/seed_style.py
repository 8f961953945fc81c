"""A re-creation of the seed project's rollout design, as the baseline of the batching benchmark.

The design (written here from its description, not from its code):

* episodes run one at a time;
* generation is batch 1, one ``model(...)`` call per sampled token, with a KV cache kept
  across the turns of one episode and a fresh cache for each episode;
* each call's logits cover every input position (no ``logits_to_keep``); the next token
  is sampled from ``softmax(logits / temperature)`` and its logprob read from the
  log-softmax;
* after a turn ends, its last sampled token is fed to the cache too, so the next turn
  only feeds the environment's chunk;
* the environment chunk is the processor's text tokenized with the plain tokenizer.

It returns the same per-episode data as trl-env (ids, env mask, logprobs, reward) so that
both sides do comparable work.

Example:
    >>> runner = SeedStyleRollout(model, tokenizer, processor, max_turns=4, max_turn_tokens=16)  # doctest: +SKIP
    >>> episodes = runner.run(FixedTurnsEnv, ["1", "2"])  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from transformers import DynamicCache


@dataclass
class SeedEpisode:
    """The token sequence and reward of one episode played the seed's way."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    reward: float = 0.0
    num_turns: int = 0


class SeedStyleRollout:
    """One episode at a time, batch-1 sampling, a KV cache per episode kept across its turns."""

    def __init__(
        self,
        model,
        tokenizer,
        processor,
        *,
        max_turns: int,
        max_turn_tokens: int,
        system_prompt: str = "",
        temperature: float = 1.0,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.processor = processor
        self.max_turns = max_turns
        self.max_turn_tokens = max_turn_tokens
        self.system_prompt = system_prompt
        self.temperature = temperature
        self.turn_end = processor.chunks.turn_end
        self.after_turn_end = processor.chunks.after_turn_end
        self.turn_end_id = tokenizer.convert_tokens_to_ids(self.turn_end)
        # transformers >= 5.2x names the argument ``cache``; older releases ``past_key_values``
        self._cache_kwarg = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False).input_ids

    def _forward(self, cache: DynamicCache, ids: list[int]) -> torch.Tensor:
        out = self.model(input_ids=torch.tensor([ids]), use_cache=True, **{self._cache_kwarg: cache})
        return out.logits[0, -1]

    def _turn(self, cache: DynamicCache, pending: list[int]) -> tuple[list[int], list[float]]:
        """Sample one turn after feeding ``pending``; the last sampled token is fed before returning."""
        ids: list[int] = []
        logprobs: list[float] = []
        feed = pending
        while True:
            logits = self._forward(cache, feed).float() / self.temperature
            token = int(torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1).item())
            logprobs.append(float(torch.log_softmax(logits, dim=-1)[token].item()))
            ids.append(token)
            if token == self.turn_end_id or len(ids) >= self.max_turn_tokens:
                break
            feed = [token]
        self._forward(cache, [token])  # the seed puts the last token into the cache at the end of a turn
        return ids, logprobs

    def _episode(self, env_factory: Callable[[], object], seed: str) -> SeedEpisode:
        env = env_factory()
        env, delta = env.reset(seed)
        prompt_text = self.processor.init_system_input(self.system_prompt) + self.processor.append_user_input(delta)
        episode = SeedEpisode(prompt_ids=self._encode(prompt_text))
        cache = DynamicCache(config=self.model.config)
        pending = episode.prompt_ids
        for _ in range(self.max_turns):
            ids, logprobs = self._turn(cache, pending)
            episode.completion_ids += ids
            episode.env_mask += [1] * len(ids)
            episode.logprobs += logprobs
            episode.num_turns += 1
            stopped = ids[-1] == self.turn_end_id
            answer = self.tokenizer.decode(ids[:-1] if stopped else ids)
            _, action = self.processor.parse_agent_output(answer)
            env, delta = env.step(action)
            episode.reward = float(env.reward)
            if not env.alive:
                break
            text = ("" if stopped else self.turn_end) + self.after_turn_end + self.processor.append_user_input(delta)
            pending = self._encode(text)
            episode.completion_ids += pending
            episode.env_mask += [0] * len(pending)
            episode.logprobs += [0.0] * len(pending)
        return episode

    def run(self, env_factory: Callable[[], object], seeds: list[str]) -> list[SeedEpisode]:
        """Play one episode per seed, one after the other."""
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                return [self._episode(env_factory, seed) for seed in seeds]
        finally:
            self.model.train(was_training)
