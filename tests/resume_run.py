"""A small GRPO run for the resume test: `python tests/resume_run.py OUTPUT_DIR [--resume]`.

It saves a checkpoint every step; the test kills it mid-run, then resumes it.
"""

import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parents[1])]

from grpo_helpers import ThreeTurnEnv, make_trainer  # noqa: E402

from trl_env import make_rollout_func  # noqa: E402
from trl_env.testing import build_qwen3_tokenizer, build_tiny_qwen3_model  # noqa: E402


def main() -> None:
    output_dir, resume = Path(sys.argv[1]), "--resume" in sys.argv
    tokenizer = build_qwen3_tokenizer(Path(__file__).resolve().parents[1] / ".cache" / "qwen3-tokenizer")
    model = build_tiny_qwen3_model(tokenizer, seed=3)
    rollout_func = make_rollout_func(ThreeTurnEnv, max_turns=3, max_turn_tokens=4)
    trainer = make_trainer(
        model,
        tokenizer,
        rollout_func,
        output_dir,
        steps=6,
        save_strategy="steps",
        save_steps=1,
        max_completion_length=96,
    )
    if resume:
        checkpoints = sorted(output_dir.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
        trainer.train(resume_from_checkpoint=str(checkpoints[-1]))
    else:
        trainer.train()
    (output_dir / "log.json").write_text(json.dumps(trainer.state.log_history))


if __name__ == "__main__":
    main()
