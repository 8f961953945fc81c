"""Environment tokens are never trained on: zero gradient at their positions, no influence on parameters.

TRL 1.16 computes log-probs with a fused LM head, so logits never exist as a tensor. The test
hooks the final norm's output instead: the hidden state at a position feeds only that
position's logits, so its gradient is the logits' gradient pulled back through the head, and
perturbing it perturbs exactly those logits.
"""

import copy

import torch
from grpo_helpers import ThreeTurnEnv, make_trainer

from trl_env import make_rollout_func


def _loss_and_logit_grads(trainer, inputs, perturb_env: bool):
    model = trainer.model
    model.zero_grad()
    captured = {}
    completion_width = inputs["completion_ids"].shape[1]
    env_positions = (inputs["completion_mask"] * (1 - inputs["tool_mask"])).bool()  # real tokens from the env

    def hook(module, args, output):
        logits = output  # final hidden states: the only input of the logits at each position
        if perturb_env:
            noise = torch.zeros_like(logits)
            width = logits.shape[1]
            # completion token j is predicted at position width - completion_width - 1 + j
            rows, cols = env_positions.nonzero(as_tuple=True)
            noise[rows, width - completion_width - 1 + cols] = torch.randn(len(rows), logits.shape[-1]) * 5
            logits = logits + noise
        logits.retain_grad()
        captured["logits"] = logits
        return logits

    handle = model.model.norm.register_forward_hook(hook)
    try:
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
    finally:
        handle.remove()
    logits = captured["logits"]
    width = logits.shape[1]
    grads = logits.grad[:, width - completion_width - 1 : width - 1]  # gradient at each completion token's logits
    params = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return grads, params, env_positions


def test_env_tokens_get_exactly_zero_gradient(qwen3_tokenizer, tiny_qwen3, tmp_path):
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=5)
    trainer = make_trainer(
        copy.deepcopy(tiny_qwen3), qwen3_tokenizer, rollout_func, tmp_path, steps=1, gradient_accumulation_steps=1
    )
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # normally set by the training loop
    batch = next(iter(trainer.get_train_dataloader()))
    inputs = trainer._prepare_inputs(batch)
    assert inputs["advantages"].abs().sum() > 0, "need non-zero advantages to see any gradient"

    grads, params, env_positions = _loss_and_logit_grads(trainer, inputs, perturb_env=False)
    assert env_positions.any()
    assert torch.count_nonzero(grads[env_positions]) == 0
    model_positions = (inputs["completion_mask"] * inputs["tool_mask"]).bool()
    assert torch.count_nonzero(grads[model_positions]) > 0

    _, perturbed_params, _ = _loss_and_logit_grads(trainer, inputs, perturb_env=True)
    assert params.keys() == perturbed_params.keys()
    for name, grad in params.items():
        assert torch.equal(grad, perturbed_params[name]), f"env-token logits changed the gradient of {name}"

    # the check can fail: with the env mask dropped (TRL's silent padding with 1), env positions get gradient
    unmasked = dict(inputs, tool_mask=torch.ones_like(inputs["tool_mask"]))
    leaked, _, _ = _loss_and_logit_grads(trainer, unmasked, perturb_env=False)
    assert torch.count_nonzero(leaked[env_positions]) > 0
