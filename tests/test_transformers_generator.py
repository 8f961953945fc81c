"""TransformersGenerator: batched sampling whose logprobs match the model's own, padding or not."""

import torch

from trl_env import TransformersGenerator


def _recomputed(model, context, ids, temperature):
    with torch.no_grad():
        logits = model(torch.tensor([context + ids])).logits[0, len(context) - 1 : -1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None]).squeeze(-1)


def test_logprobs_match_a_forward_pass_at_the_sampling_temperature(qwen3_tokenizer, tiny_qwen3):
    im_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = TransformersGenerator(tiny_qwen3, qwen3_tokenizer, temperature=0.7, stop_token_ids=[im_end])
    contexts = [[151644, 872, 198, 9707], [151644, 872, 198, 9707, 1879, 0, 16, 17, 18, 151645, 198]]  # ragged
    torch.manual_seed(0)
    generations = generator.generate(contexts, max_new_tokens=12)
    assert len(generations) == 2
    worst = 0.0
    for context, (ids, logprobs) in zip(contexts, generations, strict=True):
        assert 1 <= len(ids) <= 12 and len(ids) == len(logprobs)
        if im_end in ids:
            assert ids.index(im_end) == len(ids) - 1  # cut right after the stop token
        expected = _recomputed(tiny_qwen3, context, ids, 0.7)
        worst = max(worst, (expected - torch.tensor(logprobs)).abs().max().item())
        at_t1 = _recomputed(tiny_qwen3, context, ids, 1.0)
        assert (at_t1 - torch.tensor(logprobs)).abs().max() > 1e-3  # the check would catch unscaled logprobs
    print(f"max |logprob - recomputed| = {worst:.2e}")
    assert worst < 1e-4


def test_stops_at_the_stop_token(qwen3_tokenizer, tiny_qwen3):
    # make the stop token the model's overwhelming choice by biasing the output layer
    model = tiny_qwen3
    stop = 151645
    generator = TransformersGenerator(model, qwen3_tokenizer, temperature=1.0, stop_token_ids=[stop])
    with torch.no_grad():
        original = model.lm_head.weight[stop].clone()
        model.lm_head.weight[stop] = model.model.norm.weight.sign() * 50
        try:
            (ids, _), (ids2, _) = generator.generate([[1, 2, 3], [4]], max_new_tokens=8)
        finally:
            model.lm_head.weight[stop] = original
    assert ids == [stop] and ids2 == [stop]


def test_empty_batch(qwen3_tokenizer, tiny_qwen3):
    assert TransformersGenerator(tiny_qwen3, qwen3_tokenizer).generate([], 4) == []
