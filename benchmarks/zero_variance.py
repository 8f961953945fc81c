"""Zero-variance groups: optimizer steps per minute on the demo task with ``zero_variance`` keep, filter, resample.

Each mode trains the demo's recipe (``demo/run_demo.py``: SmolLM2-135M-Instruct + LoRA, guess-the-number,
2 secrets x 8 episodes per step, the answer prefix) for ``--steps`` optimizer steps from the same start, one
mode after the other, and reports steps per minute (training wall time, the first step included), the median
step time, the episodes played per step, TRL's ``frac_reward_zero_std`` (the fraction of the trained groups with
zero variance, after any replacement) and the ``groups/*`` figures (docs/zero_variance.md). No evaluation: this
measures cost, not learning.

    python benchmarks/zero_variance.py [--steps 4] [--modes keep,filter,resample] [--task guess] [--model DIR]

``--model`` defaults to ``.cache/smollm2-135m-instruct`` (``make demo`` fetches it); the tiny random Qwen3
(``--model tiny``) checks the script quickly but plays a task it never solves. ``--threads`` (default 1) sets
torch's CPU threads: on a shared machine more threads than free cores slow every step down.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import json
import pkgutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import OUT, ROOT, qwen3_tokenizer, tiny_model  # noqa: E402


def load(model: str):
    """The model, its tokenizer and the demo's processor (answer prefix when additive)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from demo.plan import ANSWER_PREFIX
    from trl_env.chat.chunked_processor import with_answer_prefix
    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.checks.additivity import check_additivity

    if model == "tiny":
        tokenizer = qwen3_tokenizer()
        policy = tiny_model(tokenizer)
    else:
        tokenizer = AutoTokenizer.from_pretrained(model)
        policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    processor = with_answer_prefix(ChatTemplateProcessor(tokenizer), ANSWER_PREFIX)
    if not check_additivity(tokenizer, processor).ok:
        processor = ChatTemplateProcessor(tokenizer)
    return policy, tokenizer, processor


def run(mode: str, policy, tokenizer, processor, steps: int, task: str) -> dict:
    """Train ``steps`` steps of the demo recipe with ``zero_variance=mode``; the timings and group figures."""
    import torch

    from demo.plan import DemoPlan
    from demo.tasks import TASKS
    from examples.guess_number import train_seeds
    from trl_env.generation.local_model import cpu_has_bf16
    from trl_env.trainer.recipe import TrainSettings, build_trainer

    torch.manual_seed(0)
    plan = DemoPlan.full(minutes=60)
    factory_path, env_kwargs = TASKS[task]
    settings = TrainSettings(
        steps=steps,
        lr=plan.lr,
        num_generations=plan.num_generations,
        prompts_per_step=plan.prompts_per_step,
        lora_r=plan.lora_r,
        seed=0,
        output_dir=tempfile.mkdtemp(prefix=f"zero-variance-{mode}-"),  # nothing kept: no checkpoints
        bf16=cpu_has_bf16(),
        rollout=dataclasses.replace(plan.rollout_config(), zero_variance=mode),
    )
    env_factory = functools.partial(pkgutil.resolve_name(factory_path), **env_kwargs)
    trainer = build_trainer(
        env_factory, copy.deepcopy(policy), tokenizer, train_seeds(4 * 1024, rng_seed=0), settings, processor=processor
    )
    start = time.perf_counter()
    trainer.train()
    minutes = (time.perf_counter() - start) / 60
    logs = [entry for entry in trainer.state.log_history if "step_time" in entry]
    figures = {
        name: statistics.mean(entry.get(name, 0.0) for entry in logs)
        for name in ("groups/zero_variance_fraction", "groups/extra_episodes", "groups/replaced", "groups/dropped")
    }
    figures["frac_reward_zero_std"] = statistics.mean(entry["frac_reward_zero_std"] for entry in logs)
    return {
        "mode": mode,
        "steps": trainer.state.global_step,
        "steps_per_minute": trainer.state.global_step / minutes,
        "median_step_s": statistics.median(entry["step_time"] for entry in logs),
        "episodes_per_step": settings.batch_size + figures["groups/extra_episodes"],
        **figures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--modes", default="keep,filter,resample")
    parser.add_argument("--task", default="guess", choices=("guess", "doors"))
    parser.add_argument("--model", default=str(ROOT / ".cache" / "smollm2-135m-instruct"), help="a folder, or 'tiny'")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (1: fair on a shared machine)")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    policy, tokenizer, processor = load(args.model)
    out = OUT / f"zero_variance_{args.task}_{'tiny' if args.model == 'tiny' else Path(args.model).name}.json"
    OUT.mkdir(parents=True, exist_ok=True)
    lines = [
        f"{args.steps} steps per mode, task {args.task}, model {Path(args.model).name}",
        "| mode | steps/min | median step s | episodes/step | frac_reward_zero_std (trained) | replaced | dropped |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = []
    for mode in args.modes.split(","):  # each row printed and saved as soon as its mode is done
        rows.append(row := run(mode, policy, tokenizer, processor, args.steps, args.task))
        lines.append(
            f"| {row['mode']} | {row['steps_per_minute']:.2f} | {row['median_step_s']:.1f} | "
            f"{row['episodes_per_step']:.1f} | {row['frac_reward_zero_std']:.2f} | "
            f"{row['groups/replaced']:.2f} | {row['groups/dropped']:.2f} |"
        )
        print("\n" + "\n".join(lines), flush=True)
        out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
