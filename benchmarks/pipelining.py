"""Pipelined rollouts: wall time per GRPO step with max_staleness 0, 1 and 2, by env latency.

For each env latency profile (benchmarks/latency_envs.py: instant; heavy-tailed 70 % 20 ms / 25 % 300 ms / 5 % 3 s;
every call 1 s) it trains the same steps three times with a real TurnLevelGRPOTrainer (advantage_mode="episode",
plain GRPO) on the tiny Qwen3, the default env workers (processes), and reports the median step time (the first
step, which cannot overlap, left out), the rollout and training times of the unpipelined run, the bound
max(rollout, training), the trainer's idle fraction and the generator's busy fraction. It also draws a timeline
of rollout and training spans per step for the heavy-tailed profile (benchmarks/out/pipelining_timeline.png).

    python benchmarks/pipelining.py [--steps 6] [--profiles heavy_tail,one_second,instant] [--model DIR]
                                    [--env-workers N] [--tag _suffix] [--lr LR]

``--model .cache/smollm2-135m-instruct`` (the demo's model, fetched by ``make demo``) trains SmolLM2-135M in full
instead of the tiny Qwen3; ``--env-workers 4`` queues the 16 episodes of a step on 4 env workers (more episodes
than workers, as most runs are).
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import OUT, benchmark_model  # noqa: E402
from datasets import Dataset  # noqa: E402
from latency_envs import SlowEnv  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from trl import GRPOConfig  # noqa: E402

from trl_env import env_reward, make_rollout_func  # noqa: E402
from trl_env.trainer.pipelined_training import PublishPolicy  # noqa: E402
from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer  # noqa: E402


class Spans(TrainerCallback):
    """Step boundaries, for the timeline and the step times."""

    def __init__(self) -> None:
        self.step_ends: list[float] = []

    def on_step_end(self, args, state, control, **kwargs):
        self.step_ends.append(time.perf_counter())


def timed_rollout_func(rollout_func, spans: list):
    def call(prompts, trainer):
        start = time.perf_counter()
        out = rollout_func(prompts, trainer)
        spans.append((start, time.perf_counter()))
        return out

    call.engine = None
    call.max_staleness = rollout_func.max_staleness
    return call


def run(
    model,
    tokenizer,
    profile: str,
    staleness: int,
    steps: int,
    out_dir: Path,
    env_workers: int | None = None,
    learning_rate: float = 1e-3,
) -> dict:
    factory = functools.partial(SlowEnv, profile)
    workers = {"env_workers": env_workers} if env_workers else {}  # unset: the default, as users run it
    rollout_func = make_rollout_func(factory, max_turns=3, max_turn_tokens=8, max_staleness=staleness, **workers)
    waits: list = []
    spans = Spans()
    trainer = TurnLevelGRPOTrainer(
        advantage_mode="episode",
        model=copy.deepcopy(model),
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=GRPOConfig(
            output_dir=str(out_dir),
            per_device_train_batch_size=16,
            num_generations=8,
            max_completion_length=96,
            max_steps=steps,
            learning_rate=learning_rate,
            logging_steps=1,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            bf16=False,
            seed=0,
            disable_tqdm=True,
        ),
        train_dataset=Dataset.from_dict({"prompt": [f"seed-{i}" for i in range(4 * steps)]}),
        rollout_func=timed_rollout_func(rollout_func, waits),
        callbacks=[spans],
    )
    start = time.perf_counter()
    trainer.train()
    ends = [start] + spans.step_ends
    step_s = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    wait_s = [b - a for a, b in waits]
    logs = [h for h in trainer.state.log_history if "pipeline/generator_busy_fraction" in h]
    pipelines = [cb.pipeline for cb in trainer.callback_handler.callbacks if isinstance(cb, PublishPolicy)]
    return {
        "profile": profile,
        "max_staleness": staleness,
        "step_s": statistics.median(step_s[1:]),
        "wait_s": statistics.median(wait_s[1:]),
        "train_s": statistics.median([s - w for s, w in zip(step_s[1:], wait_s[1:], strict=False)]),
        "idle_fraction": statistics.median([w / s for s, w in zip(step_s[1:], wait_s[1:], strict=False)]),
        # unpipelined, the generator is busy exactly while the trainer waits for the rollout
        "generator_busy": statistics.median([h["pipeline/generator_busy_fraction"] for h in logs])
        if logs
        else statistics.median([w / s for s, w in zip(step_s[1:], wait_s[1:], strict=False)]),
        "timeline": {"start": start, "steps": ends, "rollouts": waits},
        "plays": pipelines[0].play_spans if pipelines else [],
    }


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(9, 1.4 * len(results) + 0.6), sharex=True)
    for axis, result in zip(axes, results, strict=True):
        t0, line = result["timeline"]["start"], result["timeline"]
        for a, b in zip(line["steps"], line["steps"][1:], strict=False):
            axis.barh(1, b - a, left=a - t0, color="tab:blue", edgecolor="white")
        for a, b in line["rollouts"]:
            axis.barh(0, max(b - a, 0.02), left=a - t0, color="tab:orange", edgecolor="white")
        for a, b in result["plays"]:
            axis.barh(-1, b - a, left=a - t0, color="tab:green", edgecolor="white")
        axis.set_yticks([-1, 0, 1], ["background\nrollouts", "trainer waits\nfor rollouts", "optimizer\nsteps"])
        axis.set_title(f"max_staleness={result['max_staleness']} ({result['profile']})", fontsize=9, loc="left")
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--profiles", default="heavy_tail,one_second,instant")
    parser.add_argument("--model", help="a model folder (default: the tiny Qwen3)")
    parser.add_argument("--tag", default="", help="suffix of the output files, e.g. _smollm2")
    parser.add_argument(
        "--env-workers", type=int, help="env workers (default: the library's, 16; fewer queues the 16 episodes)"
    )
    parser.add_argument(
        "--lr",
        type=float,
        help="learning rate (default 1e-3 for the tiny Qwen3, 1e-6 for a real model, which 1e-3 "
        "would collapse within two steps into one-token answers, making every later rollout unrepresentatively short)",
    )
    args = parser.parse_args()
    learning_rate = args.lr or (1e-6 if args.model else 1e-3)
    model, tokenizer = benchmark_model(args.model)
    model.train()
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for profile in args.profiles.split(","):
        for staleness in (0, 1, 2):
            result = run(
                model, tokenizer, profile, staleness, args.steps, OUT / "pipelining", args.env_workers, learning_rate
            )
            results.append(result)
            print(f"{profile:>10} max_staleness={staleness}: step {result['step_s']:.2f} s", flush=True)
    print()
    print(
        "| env calls | max_staleness | s/step | vs 0 | bound max(rollout, train) | vs bound | trainer idle "
        "| generator busy |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for result in results:
        base = next(r for r in results if r["profile"] == result["profile"] and r["max_staleness"] == 0)
        bound = max(base["wait_s"], base["train_s"])
        print(
            f"| {result['profile']} | {result['max_staleness']} | {result['step_s']:.2f} | "
            f"{result['step_s'] / base['step_s']:.2f}x | {bound:.2f} | {result['step_s'] / bound:.2f}x | "
            f"{result['idle_fraction']:.0%} | {result['generator_busy']:.0%} |"
        )
    heavy = [r for r in results if r["profile"] == results[0]["profile"]]
    plot(heavy, OUT / f"pipelining_timeline{args.tag}.png")
    for result in results:
        result.pop("timeline"), result.pop("plays")
    (OUT / f"pipelining{args.tag}.json").write_text(json.dumps(results, indent=1))
    print(f"\nwrote {OUT / f'pipelining_timeline{args.tag}.png'} and {OUT / f'pipelining{args.tag}.json'}")


if __name__ == "__main__":
    main()
