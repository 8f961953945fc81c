"""Caching generators: reused keys and values give the model's own logprobs, and the store stays bounded."""

import torch

from tests.envs.basic import Countdown  # noqa: F401
from trl_env import ChatTemplateProcessor, rollout
from trl_env.generation.kv_cache import EpisodeCacheGenerator
from trl_env.generation.prefix_caching import PrefixCachingGenerator, common_prefix_length

IM_END = 151645
TOLERANCE = 1e-4


def _recomputed(model, context, ids, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([context + ids])).logits[0, len(context) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)


def _worst_difference(model, contexts, generations, temperature):
    worst = 0.0
    for context, (ids, logprobs) in zip(contexts, generations, strict=True):
        assert 1 <= len(ids) and len(ids) == len(logprobs)
        expected = _recomputed(model, context, ids, temperature)
        worst = max(worst, (expected - torch.tensor(logprobs)).abs().max().item())
    return worst


def _opening(length):
    return [151644, 8948, 198, *range(1000, 1000 + length), 151645, 198]


def test_common_prefix_length():
    assert common_prefix_length([[1, 2, 3], [1, 2, 3]]) == 3
    assert common_prefix_length([[1, 2, 3], [1, 9, 3], [1, 2]]) == 1
    assert common_prefix_length([[5], [6]]) == 0


def test_prefix_caching_matches_a_forward_pass(qwen3_tokenizer, tiny_qwen3):
    generator = PrefixCachingGenerator(tiny_qwen3, qwen3_tokenizer, temperature=0.7, stop_token_ids=[IM_END])
    contexts = [_opening(12) + [151644, 872, 198, 20 + i] * (i + 1) for i in range(3)]  # shared opening, ragged rest
    torch.manual_seed(0)
    generations = generator.generate(contexts, max_new_tokens=10)
    worst = _worst_difference(tiny_qwen3, contexts, generations, 0.7)
    print(f"prefix caching: max |logprob - recomputed| = {worst:.2e}")
    assert worst < TOLERANCE


def test_episode_cache_reuses_each_episode_and_matches_a_forward_pass(qwen3_tokenizer, tiny_qwen3):
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=0.7, stop_token_ids=[IM_END])
    contexts = [_opening(6 + 3 * i) + [151644, 872, 198, 30 + i] for i in range(4)]
    torch.manual_seed(1)
    worst = 0.0
    for turn in range(4):
        generations = generator.generate(contexts, max_new_tokens=6 + turn)
        worst = max(worst, _worst_difference(tiny_qwen3, contexts, generations, 0.7))
        stored = sum(len(c) + len(g.ids) - 1 for c, g in zip(contexts, generations, strict=True))
        assert len(generator) == len(contexts)
        reply = [[151644, 872, 198, *range(50, 50 + row % 3 + 1), IM_END, 198] for row in range(len(contexts))]
        contexts = [c + g.ids + r for c, g, r in zip(contexts, generations, reply, strict=True)]
        contexts.append(_opening(9) + [151644, 872, 198, 40 + turn])  # a fresh episode joins the batch
        before = generator.stats.reused_tokens
        if turn < 3:
            generator.generate(contexts[:0], 1)  # an empty call changes nothing
        assert generator.stats.reused_tokens == before
    generations = generator.generate(contexts, max_new_tokens=8)
    worst = max(worst, _worst_difference(tiny_qwen3, contexts, generations, 0.7))
    print(f"episode cache: max |logprob - recomputed| = {worst:.2e}, reuse {generator.stats.reuse_rate:.0%}")
    assert worst < TOLERANCE
    assert generator.stats.reused_tokens >= stored  # the last turn alone reused every previous episode's tokens
    assert generator.stats.reuse_rate > 0.5


def test_episode_cache_is_dropped_when_the_weights_change(qwen3_tokenizer, tiny_qwen3):
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[IM_END])
    context = _opening(10)
    ((ids, _),) = generator.generate([context], max_new_tokens=4)
    assert len(generator) == 1
    bias = torch.zeros_like(tiny_qwen3.model.norm.weight)
    bias[0] = 0.5
    with torch.no_grad():
        tiny_qwen3.model.norm.weight.add_(bias)  # an optimizer step, in miniature
    try:
        follow_up = context + ids + [151644, 872, 198, 7, IM_END, 198]
        reused_before = generator.stats.reused_tokens
        generations = generator.generate([follow_up], max_new_tokens=4)
        assert generator.stats.invalidations == 1
        assert generator.stats.reused_tokens == reused_before
        assert _worst_difference(tiny_qwen3, [follow_up], generations, 1.0) < TOLERANCE
    finally:
        with torch.no_grad():
            tiny_qwen3.model.norm.weight.sub_(bias)


def test_episode_cache_drops_ended_episodes_and_the_least_recently_used(qwen3_tokenizer, tiny_qwen3):
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=1.0, stop_token_ids=[IM_END])
    generator.max_entries = 3
    first = generator.generate([_opening(4), _opening(5)], max_new_tokens=3)
    assert len(generator) == 2
    generator.generate([_opening(7)], max_new_tokens=3)  # idle entries are kept while there is room
    assert len(generator) == 3
    generator.generate([_opening(8)], max_new_tokens=3)  # over max_entries: the oldest call's go first
    assert len(generator) == 3
    assert not any(key[: len(_opening(4))] == tuple(_opening(4)) for key in generator._store.entries)
    generator.end_episode([*_opening(5), *first[1].ids, 7])  # an ended episode is dropped at once
    assert len(generator) == 2
    generator.clear()
    assert len(generator) == 0


def test_rollout_with_the_episode_cache_keeps_every_logprob_exact(qwen3_tokenizer, tiny_qwen3):
    processor = ChatTemplateProcessor(qwen3_tokenizer)
    generator = EpisodeCacheGenerator(tiny_qwen3, qwen3_tokenizer, temperature=0.8, stop_token_ids=[IM_END])
    torch.manual_seed(2)
    episodes = rollout(
        Countdown,
        ["2", "3", "5", "5"],
        generator,
        processor,
        tokenizer=qwen3_tokenizer,
        max_turns=5,
        max_turn_tokens=6,
        max_completion_tokens=400,
    )
    worst = 0.0
    for episode in episodes:
        sequence = episode.prompt_ids + episode.completion_ids
        with torch.no_grad():
            logits = tiny_qwen3(torch.tensor([sequence])).logits[0].float() / 0.8
        logprobs = torch.log_softmax(logits, -1)
        start = len(episode.prompt_ids)
        sampled = [i for i, mask in enumerate(episode.env_mask) if mask == 1]
        expected = [logprobs[start + i - 1, episode.completion_ids[i]].item() for i in sampled]
        got = [episode.logprobs[i] for i in sampled]
        worst = max(worst, max(abs(a - b) for a, b in zip(expected, got, strict=True)))
    print(f"rollout: max |logprob - recomputed| = {worst:.2e}, reuse {generator.stats.reuse_rate:.0%}")
    assert max(e.num_turns for e in episodes) >= 3
    assert generator.stats.reuse_rate > 0.3
    assert worst < TOLERANCE


def test_a_sliding_window_model_is_sampled_without_reuse(qwen3_tokenizer, tiny_qwen3):
    from transformers import Qwen3ForCausalLM

    config = tiny_qwen3.config.__class__(
        **{
            **tiny_qwen3.config.to_dict(),
            "use_sliding_window": True,
            "sliding_window": 8,
            "layer_types": ["sliding_attention"] * 2,
        }
    )
    model = Qwen3ForCausalLM(config).eval()
    contexts = [_opening(12), _opening(14)]  # a shared prefix longer than the window
    generator = EpisodeCacheGenerator(model, qwen3_tokenizer, temperature=1.0, stop_token_ids=[IM_END])
    generations = generator.generate(contexts, max_new_tokens=4)
    assert len(generator) == 0 and generator.stats.context_tokens == 0
    assert _worst_difference(model, contexts, generations, 1.0) < TOLERANCE
    prefix_only = PrefixCachingGenerator(model, qwen3_tokenizer, temperature=1.0, stop_token_ids=[IM_END])
    assert _worst_difference(model, contexts, prefix_only.generate(contexts, 4), 1.0) < TOLERANCE
