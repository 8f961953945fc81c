"""trl-env against TRL's own tool loop: the calculator trained both ways, same model, recipe and minutes.

The task is ``examples.tool_calculator:Calculator`` ("What is A * B + C?" with ``multiply``, ``add`` and
``answer`` tools; reward 1 for the right ``answer()``), a class written for TRL's
``GRPOTrainer(environment_factory=...)``. Two arms train SmolLM2-135M-Instruct + LoRA on it:

* ``trl``: ``GRPOTrainer(environment_factory=Calculator)`` as TRL 1.16 documents it: no ``reward_funcs``
  (TRL scores with the class's ``get_reward``), ``max_tool_calling_iterations`` in the ``GRPOConfig``,
  the prompts as conversations;
* ``trl-env``: :func:`~trl_env.trainer.recipe.build_trainer` over
  ``trl_environment(Calculator, max_tool_calling_iterations=...)``: the same class unchanged, played by
  trl-env's rollout function (TRL's tool-loop semantics, see :mod:`trl_env.adapters.trl_environment`).

Same recipe (one :class:`~trl_env.trainer.recipe.TrainSettings`: the ``GRPOConfig`` of
:func:`~trl_env.trainer.recipe.grpo_config`, the LoRA adapter of :func:`~trl_env.trainer.recipe.with_lora`,
the wall-time limit :class:`~trl_env.trainer.recipe.TimeLimit`), same training questions in the same order,
same minutes. SmolLM2's own chat template renders no tools (TRL refuses it), so both arms use TRL's Qwen2.5
template (ChatML, the same ``<|im_start|>``/``<|im_end|>`` markup SmolLM2 was tuned on, plus hermes-style
``<tool_call>`` blocks). Held-out success is measured the same way for both arms and for the untrained model
(arm ``untrained``): :func:`trl_env.evaluate` over held-out questions disjoint from the training ones.

Usage (from the repository root; each run in its own process, one at a time; a run whose
``summary.json`` exists is not run again)::

    python experiments/vs_trl_tools.py run --seeds 0 1 2 --minutes 10
    python experiments/vs_trl_tools.py report      # experiments/out/vs_trl_tools.json

Example:
    >>> train, heldout = questions(4, 3)
    >>> len(train), len(heldout), bool(set(train) & set(heldout))
    (4, 3, False)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # ``examples`` and ``demo`` are importable from anywhere
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

RUNS = ROOT / "outputs" / "experiments" / "vs_trl_tools"
RESULT = ROOT / "experiments" / "out" / "vs_trl_tools.json"
ARMS = ("trl", "trl-env")  # trained arms; "untrained" is evaluated once
TOOL_ITERATIONS = 3  # multiply, add, answer: then a final message ends the episode
TEMPLATE = "qwen2_5"  # TRL's shipped template: ChatML with tools, recognised by TRL's response parsing


def questions(train: int, heldout: int) -> tuple[list[str], list[str]]:
    """``heldout`` distinct held-out questions, and ``train`` training questions (repeats allowed) never among them.

    There are only 576 questions (``A, B`` in 2..9, ``C`` in 1..9), so the held-out ones are set aside first.

    Example:
        >>> questions(2, 1)
        (['What is 8 * 8 + 1?', 'What is 6 * 9 + 7?'], ['What is 4 * 3 + 5?'])
    """
    from examples.tool_calculator.env import problems

    held = list(dict.fromkeys(problems(40 * heldout, seed=1)))[:heldout]
    excluded = set(held)
    training = [q for q in problems(2 * train + 4 * heldout, seed=0) if q not in excluded][:train]
    return training, held


def settings_for(
    seed: int,
    minutes: float,
    output_dir: Path,
    bf16: bool,
    max_steps: int | None = None,
    tokens: int = 256,
    generations: int = 8,
    questions_per_step: int = 2,
) -> Any:
    """The one recipe both arms train with (the demo's: LoRA r=16, lr 5e-4, 2 questions x 8 episodes per step).

    ``generations`` and ``questions_per_step`` shrink the step for smoke runs (a step's cost grows with both).
    """
    from trl_env.engine.config import RolloutConfig
    from trl_env.trainer.recipe import TrainSettings

    return TrainSettings(
        steps=max_steps or 10_000,  # the minutes decide
        lr=5e-4,
        num_generations=generations,
        prompts_per_step=questions_per_step,
        lora_r=16,
        max_minutes=minutes,
        seed=seed,
        output_dir=str(output_dir / "trainer"),
        bf16=bf16,
        # TRL caps only the whole completion, so the per-turn cap is the whole budget too
        rollout=RolloutConfig(
            max_turns=TOOL_ITERATIONS + 1,
            max_turn_tokens=tokens,
            max_completion_tokens=tokens,
            env_isolation="thread",  # TRL calls the tools in its own process too
        ),
    )


def load(model_dir: Path) -> tuple[Any, Any]:
    """The model (float32) and its tokenizer with TRL's Qwen2.5 template (tools rendered), ``<|im_end|>`` its eos.

    The converted SmolLM2 tokenizer names ``<|im_start|>`` its eos token; TRL aligns the model's generation
    config with the tokenizer's eos, so TRL would sample past the end of a turn. ``<|im_end|>`` is where a
    ChatML turn ends (trl-env reads that from the template by itself).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_env.testing.qwen3_tokenizer import trl_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.chat_template = trl_chat_template(TEMPLATE)
    tokenizer.eos_token = "<|im_end|>"
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32), tokenizer


def train_arm(arm: str, model: Any, tokenizer: Any, training: list[str], settings: Any) -> Any:
    """A ready trainer of ``arm`` (``"trl"`` or ``"trl-env"``) over the training questions."""
    from datasets import Dataset
    from trl import GRPOTrainer

    from examples.tool_calculator import Calculator
    from trl_env.adapters.trl_environment import trl_environment
    from trl_env.trainer.recipe import TimeLimit, build_trainer, grpo_config, training_prompts, with_lora

    if arm == "trl-env":
        factory = trl_environment(Calculator, max_tool_calling_iterations=TOOL_ITERATIONS)
        return build_trainer(factory, model, tokenizer, training, settings)
    prompts = [[{"role": "user", "content": q}] for q in training_prompts(training, settings)]
    return GRPOTrainer(
        model=with_lora(model, settings),
        processing_class=tokenizer,
        args=grpo_config(settings, max_tool_calling_iterations=TOOL_ITERATIONS),
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        environment_factory=Calculator,
        callbacks=[TimeLimit(settings.max_minutes)],
    )


def one_run(arm: str, seed: int, args: argparse.Namespace, out: Path) -> dict:
    """Train one arm for ``args.minutes`` (none for ``"untrained"``), evaluate it, write ``out/summary.json``.

    ``args``: ``minutes``, ``eval_episodes``, ``threads``, ``fp32``, ``model`` (None: SmolLM2-135M-Instruct),
    ``max_steps`` (None: the minutes decide), ``tokens`` (the completion budget), ``generations`` and
    ``questions_per_step`` (the step's size), as ``main`` parses them.
    """
    import torch

    from demo.demo_model import ensure_demo_model
    from examples.tool_calculator import Calculator
    from trl_env.adapters.trl_environment import trl_environment
    from trl_env.evaluation import evaluate
    from trl_env.generation.local_model import cpu_has_bf16

    torch.set_num_threads(args.threads)
    bf16 = not args.fp32 and cpu_has_bf16()
    model, tokenizer = load(Path(args.model) if args.model else ensure_demo_model())
    training, heldout = questions(4096, args.eval_episodes)
    settings = settings_for(
        seed, args.minutes, out, bf16, args.max_steps, args.tokens, args.generations, args.questions_per_step
    )
    steps, train_seconds = 0, 0.0
    if arm != "untrained":
        trainer = train_arm(arm, model, tokenizer, training, settings)
        start = time.perf_counter()
        trainer.train()
        train_seconds = time.perf_counter() - start
        steps, model = trainer.state.global_step, trainer.model
    torch.manual_seed(1234)  # the same sampling noise for every arm
    summary = evaluate(
        trl_environment(Calculator, max_tool_calling_iterations=TOOL_ITERATIONS),
        model,
        tokenizer,
        heldout,
        config=settings.rollout,
        batch_size=32,
        progress=False,
        autocast_dtype=torch.bfloat16 if bf16 else None,
    )
    out.mkdir(parents=True, exist_ok=True)
    summary.write_jsonl(out / "transcripts_heldout.jsonl")
    result = {
        "arm": arm,
        "seed": seed,
        "minutes": args.minutes,
        "steps": steps,
        "train_seconds": train_seconds,
        "steps_per_minute": steps / (train_seconds / 60) if train_seconds else None,
        "heldout_success": summary.success_rate,
        "heldout_mean_turns": summary.mean_turns,
        "eval_episodes": len(heldout),
        "bf16": bf16,
        "threads": args.threads,
    }
    (out / "summary.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result), flush=True)
    return result


def run(args: argparse.Namespace) -> None:
    """Every arm and seed (and the untrained model once), one process each; finished runs are skipped."""
    plan = [("untrained", 0)] + [(arm, seed) for seed in args.seeds for arm in ARMS]
    for arm, seed in plan:
        if (args.runs / f"{arm}-seed{seed}" / "summary.json").exists():
            continue
        command = [sys.executable, __file__, "one", "--arm", arm, "--seed", str(seed), "--runs", str(args.runs)]
        command += ["--minutes", str(args.minutes), "--eval-episodes", str(args.eval_episodes)]
        command += ["--threads", str(args.threads)] + (["--fp32"] if args.fp32 else [])
        command += ["--model", args.model] if args.model else []
        command += ["--max-steps", str(args.max_steps)] if args.max_steps else []
        command += ["--tokens", str(args.tokens), "--generations", str(args.generations)]
        command += ["--questions-per-step", str(args.questions_per_step)]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)


def report(runs: Path = RUNS, result: Path = RESULT) -> dict:
    """Held-out success and steps per minute per arm and seed, from the runs' summaries; writes ``result``."""
    rows: dict[str, list[dict]] = {}
    for path in sorted(runs.glob("*-seed*/summary.json")):
        summary = json.loads(path.read_text())
        rows.setdefault(summary["arm"], []).append(summary)
    table: dict[str, Any] = {}
    for arm, summaries in rows.items():
        success = [s["heldout_success"] for s in summaries]
        table[arm] = {
            "seeds": [s["seed"] for s in summaries],
            "heldout_success": success,
            "mean": statistics.mean(success),
            "sd": statistics.stdev(success) if len(success) > 1 else None,
            "steps": [s["steps"] for s in summaries],
            "steps_per_minute": [s["steps_per_minute"] for s in summaries],
            "minutes": [s["minutes"] for s in summaries],
            "eval_episodes": [s["eval_episodes"] for s in summaries],
        }
        per_minute = ", ".join("-" if v is None else f"{v:.2f}" for v in table[arm]["steps_per_minute"])
        print(
            f"{arm:>9}: held-out success {table[arm]['mean']:.3f} over {len(success)} seed(s) {success}; "
            f"steps {table[arm]['steps']} ({per_minute} per minute)"
        )
    result.parent.mkdir(parents=True, exist_ok=True)
    result.write_text(json.dumps(table, indent=1))
    return table


def main(argv: list[str] | None = None) -> int:
    """The ``run``, ``report`` and (internal, one run) ``one`` subcommands."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    go, one = sub.add_parser("run"), sub.add_parser("one")
    go.add_argument("--seeds", nargs="+", type=int, default=[0])
    one.add_argument("--arm", choices=(*ARMS, "untrained"), required=True)
    one.add_argument("--seed", type=int, default=0)
    for command in (go, one):
        command.add_argument("--minutes", type=float, default=10.0, help="training wall time per run (default 10)")
        command.add_argument("--eval-episodes", type=int, default=128, help="held-out questions (default 128)")
        command.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
        command.add_argument("--fp32", action="store_true", help="no bfloat16 autocast even where the CPU has it")
        command.add_argument("--model", help="model directory (default: SmolLM2-135M-Instruct, as the demo's)")
        command.add_argument("--max-steps", type=int, help="stop after N steps (default: the minutes decide)")
        command.add_argument("--tokens", type=int, default=256, help="completion tokens per episode (default 256)")
        command.add_argument("--generations", type=int, default=8, help="episodes per question (default 8)")
        command.add_argument("--questions-per-step", type=int, default=2, help="questions per step (default 2)")
    report_parser = sub.add_parser("report")
    for command in (go, one, report_parser):
        command.add_argument("--runs", type=Path, default=RUNS, help=f"the runs' folder (default {RUNS})")
    report_parser.add_argument("--result", type=Path, default=RESULT, help=f"the JSON written (default {RESULT})")
    args = parser.parse_args(argv)
    if args.command == "one":
        one_run(args.arm, args.seed, args, args.runs / f"{args.arm}-seed{args.seed}")
    elif args.command == "run":
        run(args)
        report(args.runs)
    else:
        report(args.runs, args.result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
