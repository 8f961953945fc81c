"""Two GRPO steps with ``use_vllm=True, vllm_mode="colocate"`` on a multi-turn env (test driver).

Run in its own process by ``test_grpo_colocate.py`` (vLLM allows one engine per process and the
test session already holds one). Writes a JSON summary to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--max-staleness", type=int, default=0)
    args = parser.parse_args()

    from vllm_helpers import TEMPERATURE, CountdownEnv, set_vllm_env

    set_vllm_env()
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from trl_env import env_reward, make_rollout_func
    from trl_env.generation.trainer_vllm import TrainerVLLMGenerator
    from trl_env.trainer.trl_compat import enable_vllm_cpu_weight_sync

    calls: list[int] = []
    generate = TrainerVLLMGenerator.generate

    def counting(self, contexts, max_new_tokens):
        calls.append(len(contexts))
        return generate(self, contexts, max_new_tokens)

    TrainerVLLMGenerator.generate = counting
    enable_vllm_cpu_weight_sync()  # idempotent; needed before train() on vLLM-CPU
    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype="float32")
    config = GRPOConfig(
        output_dir=str(Path(args.out).parent / "grpo"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=64,
        max_steps=args.steps,
        learning_rate=5e-3,
        beta=0.0,
        logging_steps=1,
        report_to="none",
        use_cpu=True,
        save_strategy="no",
        bf16=False,
        temperature=TEMPERATURE,
        use_vllm=True,
        vllm_mode="colocate",
        vllm_max_model_length=1024,
        seed=0,
    )
    seeds = [f"{1 + i % 3}-{i}" for i in range(4 * args.steps)]
    versions: list[list[int]] = []

    def recording(rollout_func):
        def call(prompts, trainer):
            batch = rollout_func(prompts, trainer)
            versions.append([trainer.state.global_step, *batch["policy_version"]])
            return batch

        return call

    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": seeds}),
        rollout_func=recording(
            make_rollout_func(CountdownEnv, max_turns=3, max_turn_tokens=8, max_staleness=args.max_staleness)
        ),
    )
    trainer.train()
    logs = [{k: v for k, v in entry.items() if isinstance(v, int | float)} for entry in trainer.state.log_history]
    synced, stale = check_weight_sync(trainer, args.model_dir, tokenizer)
    Path(args.out).write_text(
        json.dumps(
            {
                "calls": calls,
                "versions": versions,
                "logs": logs,
                "global_step": trainer.state.global_step,
                "synced_diff": synced,
                "stale_diff": stale,
            }
        )
    )


def check_weight_sync(trainer, model_dir: str, tokenizer) -> tuple[float, float]:
    """Sync the trained weights, sample through vLLM, and return the max logprob gap to the trained
    model and to the initial (stale) model: the first is vLLM's bf16 noise, the second much larger."""
    from transformers import AutoModelForCausalLM
    from vllm_helpers import TEMPERATURE, recompute_logprobs

    from trl_env.generation.trainer_vllm import TrainerVLLMGenerator

    trainer.vllm_generation.sync_weights()
    contexts = [tokenizer.encode(f"<|im_start|>user\nSeed {i}.<|im_end|>\n<|im_start|>assistant\n") for i in range(4)]
    generations = TrainerVLLMGenerator(trainer).generate(contexts, 12)
    trained = trainer.model.eval()
    initial = AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32").eval()
    synced, stale = 0.0, 0.0
    for context, generation in zip(contexts, generations, strict=True):
        new = recompute_logprobs(trained, context, generation.ids, TEMPERATURE)
        old = recompute_logprobs(initial, context, generation.ids, TEMPERATURE)
        synced = max(synced, *(abs(a - b) for a, b in zip(generation.logprobs, new, strict=True)))
        stale = max(stale, *(abs(a - b) for a, b in zip(generation.logprobs, old, strict=True)))
    return synced, stale


if __name__ == "__main__":
    main()
