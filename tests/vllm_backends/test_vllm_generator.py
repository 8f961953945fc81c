"""VLLMGenerator on the session's in-process vLLM engine: batched multi-turn rollouts and logprobs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from vllm_helpers import TEMPERATURE, CountdownEnv, recompute_logprobs, vllm_installed

from trl_env import ChatTemplateProcessor, rollout
from trl_env.generation.vllm_engine import VLLMGenerator

pytestmark = pytest.mark.skipif(not vllm_installed(), reason="vLLM is not installed (scripts/install_vllm_cpu.sh)")

# float32 on both sides: the agreement is ~1e-5; misaligned or unscaled logprobs are off by > 0.5.
LOGPROB_TOLERANCE = 2e-3


class CountingGenerator:
    """Records the batch size of every generate call."""

    def __init__(self, inner: VLLMGenerator) -> None:
        self.inner, self.batches = inner, []

    def generate(self, contexts: list[list[int]], max_new_tokens: int):
        self.batches.append(len(contexts))
        return self.inner.generate(contexts, max_new_tokens)


@pytest.fixture(scope="module", params=["turn", "episode"])
def episodes(vllm_llm, qwen3_tokenizer, request):
    """Twelve episodes of one to four turns, played in one batched rollout at temperature 0.7, per schedule."""
    generator = CountingGenerator(
        VLLMGenerator(vllm_llm, temperature=TEMPERATURE, stop_token_ids=[qwen3_tokenizer.eos_token_id])
    )
    seeds = [f"{1 + i % 4}-{i}" for i in range(12)]
    played = rollout(
        CountdownEnv,
        seeds,
        generator,
        ChatTemplateProcessor(qwen3_tokenizer),
        tokenizer=qwen3_tokenizer,
        max_turns=4,
        max_turn_tokens=12,
        max_completion_tokens=160,
        schedule=request.param,
    )
    return played, generator.batches, request.param


def test_batched_multiturn_rollout_keeps_every_invariant(episodes, qwen3_tokenizer):
    played, batches, schedule = episodes
    for episode in played:
        episode.check(qwen3_tokenizer)
        assert episode.stop_reason in ("done", "max_turns", "token_budget")
    assert sum(batches) == sum(e.num_turns for e in played)
    if schedule == "turn":
        assert batches[0] == 12, "the first turn must batch every episode"
        assert len(batches) <= 4 and batches == sorted(batches, reverse=True)
    assert max(e.num_turns for e in played) >= 3
    turns = [t for e in played for t in e.turns]
    assert any(t.stopped for t in turns) and any(not t.stopped for t in turns), "want both stopped and cut turns"


def test_sampled_logprobs_match_transformers_after_temperature(episodes, peaked_hf_model):
    played, _, _ = episodes
    diffs, unscaled, shifted = [], [], []
    for episode in played:
        reference = recompute_logprobs(peaked_hf_model, episode.prompt_ids, episode.completion_ids, TEMPERATURE)
        at_one = recompute_logprobs(peaked_hf_model, episode.prompt_ids, episode.completion_ids, 1.0)
        sampled = [i for i, m in enumerate(episode.env_mask) if m == 1]
        diffs += [abs(episode.logprobs[i] - reference[i]) for i in sampled]
        unscaled += [abs(episode.logprobs[i] - at_one[i]) for i in sampled]
        shifted += [abs(episode.logprobs[i] - reference[i - 1]) for i in sampled if i > 0]
    print(f"\nvLLM vs transformers sampled-token logprobs over {len(diffs)} tokens: max abs diff {max(diffs):.2e}")
    assert max(diffs) < LOGPROB_TOLERANCE
    assert max(unscaled) > 0.5, "the test must tell temperature-scaled logprobs from raw ones"
    assert max(shifted) > 0.5, "the test must tell aligned logprobs from off-by-one ones"


def test_generate_contract(vllm_llm, qwen3_tokenizer):
    stop = qwen3_tokenizer.eos_token_id
    generator = VLLMGenerator(vllm_llm, temperature=1.0, top_k=50, stop_token_ids=[stop])
    assert generator.generate([], 8) == []
    contexts = [
        qwen3_tokenizer.encode(f"<|im_start|>user\nhello {i}<|im_end|>\n<|im_start|>assistant\n") for i in range(6)
    ]
    generations = generator.generate(contexts, 5)
    assert len(generations) == 6
    for generation in generations:
        assert 1 <= len(generation.ids) <= 5 and len(generation.logprobs) == len(generation.ids)
        assert stop not in generation.ids[:-1]
        assert all(lp <= 0.0 for lp in generation.logprobs)


def test_rejects_an_engine_without_processed_logprobs():
    llm = SimpleNamespace(
        llm_engine=SimpleNamespace(model_config=SimpleNamespace(logprobs_mode="raw_logprobs")),
        get_tokenizer=lambda: SimpleNamespace(eos_token_id=2),
    )
    with pytest.raises(ValueError, match="processed_logprobs"):
        VLLMGenerator(llm)
