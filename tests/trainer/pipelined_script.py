"""A user-style pipelined training script for the Ctrl-C test: `python tests/trainer/pipelined_script.py OUT_DIR`.

Its envs' calls take 2 s, so when the test interrupts it the background thread is inside a rollout.
"""

import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parents[2])]

from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from tests.envs.basic import SlowCounting  # noqa: E402
from trl_env import TurnLevelGRPOTrainer, env_reward, make_rollout_func  # noqa: E402
from trl_env.testing import build_qwen3_tokenizer, build_tiny_qwen3_model  # noqa: E402


class Marker(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        (Path(args.output_dir) / f"step-{state.global_step}").touch()


def main() -> None:
    output_dir = Path(sys.argv[1])
    tokenizer = build_qwen3_tokenizer(Path(__file__).resolve().parents[2] / ".cache" / "qwen3-tokenizer")
    trainer = TurnLevelGRPOTrainer(
        advantage_mode="episode",
        model=build_tiny_qwen3_model(tokenizer),
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=GRPOConfig(
            output_dir=str(output_dir),
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=48,
            max_steps=50,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            bf16=False,
            disable_tqdm=True,
        ),
        train_dataset=Dataset.from_dict({"prompt": [f"seed-{i}" for i in range(200)]}),
        rollout_func=make_rollout_func(SlowCounting, max_turns=3, max_turn_tokens=4, max_staleness=2),
        callbacks=[Marker()],
    )
    trainer.train()


if __name__ == "__main__":
    main()
