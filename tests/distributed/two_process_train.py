"""Two GRPO steps of a real ``GRPOTrainer`` with ``make_rollout_func`` on each process (test driver).

Started by ``test_two_processes.py`` under ``torchrun --nproc_per_node 2`` or ``accelerate launch
--config_file configs/accelerate_cpu_2proc.yaml``. Each process writes ``OUT/rank{RANK}.json``: its
rollouts (seeds, turns, failures, rewards), TRL's log history, or the error that stopped training.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--max-staleness", type=int, default=0)
    args = parser.parse_args()
    sys.path[:0] = [str(ROOT), str(ROOT / "src")]  # env workers import tests.distributed.rank_envs

    import torch

    torch.set_num_threads(1)  # two processes share the machine's cores
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from tests.distributed.rank_envs import RankedEnv, rank
    from trl_env import TurnLevelGRPOTrainer, env_reward, make_rollout_func

    inner = make_rollout_func(
        RankedEnv,
        max_turns=4,
        max_turn_tokens=4,
        env_isolation="process",
        transcripts_every=1,
        transcripts_per_step=1,
        max_staleness=args.max_staleness,
    )
    # where wandb is installed, the transcript table of both processes goes to an offline run under OUT/wandb
    tables = importlib.util.find_spec("wandb") is not None
    os.environ.update(WANDB_MODE="offline", WANDB_DIR=args.out, WANDB_SILENT="true", WANDB_PROJECT="trl-env-test")
    rollouts: list[dict] = []

    def rollout_func(prompts, trainer):
        batch = inner(prompts, trainer)
        rollouts.append(
            {
                "step": trainer.state.global_step,
                "seeds": list(prompts),
                "num_turns": batch["num_turns"],
                "failed": batch["failed"],
                "env_reward": batch["env_reward"],
                "policy_version": batch["policy_version"],
            }
        )
        return batch

    tokenizer = AutoTokenizer.from_pretrained(args.model_dir)
    model = AutoModelForCausalLM.from_pretrained(args.model_dir, dtype="float32")
    config = GRPOConfig(
        output_dir=str(Path(args.out) / "grpo"),
        per_device_train_batch_size=8,  # two groups of 4 per process
        num_generations=4,
        max_completion_length=64,
        max_steps=args.steps,
        learning_rate=1e-3,
        beta=0.0,
        logging_steps=1,
        report_to=["wandb"] if tables else "none",
        use_cpu=True,  # with accelerate's config this is what makes the processes use gloo on the CPU
        save_strategy="no",
        bf16=False,
        shuffle_dataset=False,  # step 1 plays seeds 0-3, step 2 seeds 4-7; rank 1 gets the later two of each
        seed=0,
    )
    pipelined = {"advantage_mode": "episode"} if args.max_staleness else {}  # the trainer that corrects the loss
    trainer = (TurnLevelGRPOTrainer if args.max_staleness else GRPOTrainer)(
        **pipelined,
        model=model,
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": [str(i) for i in range(4 * args.steps)]}),
        rollout_func=rollout_func,
    )
    summary: dict = {"rank": rank(), "num_processes": trainer.accelerator.num_processes, "pid": os.getpid()}
    try:
        trainer.train()
    except Exception as error:
        summary.update(error=f"{type(error).__name__}: {error}", traceback=traceback.format_exc())
    summary.update(
        rollouts=rollouts,
        logs=[{k: v for k, v in entry.items() if isinstance(v, int | float)} for entry in trainer.state.log_history],
        global_step=trainer.state.global_step,
    )
    Path(args.out, f"rank{rank()}.json").write_text(json.dumps(summary, indent=1))
    if "error" in summary:
        # torchrun stops the other processes as soon as one fails: give them time to write their own report
        time.sleep(3)
        sys.exit(3)


if __name__ == "__main__":
    main()
