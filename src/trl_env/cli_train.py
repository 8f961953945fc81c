"""``trl-env train``: GRPO on a multi-turn environment with TRL's ``GRPOTrainer``.

Each step draws ``--prompts-per-step`` seeds and plays ``--num-generations`` episodes of
each (one GRPO group per seed) through :func:`~trl_env.trl_glue.make_rollout_func`; the
reward is the environment's. ``--lora-r 0`` trains all weights, otherwise a LoRA adapter
on every linear layer (peft); the saved model is always a plain, merged model directory
that ``trl-env eval --model`` reads. ``--max-minutes`` stops training after a wall-time
budget (checked after every step).

Example:
    >>> main(["train", "--env", "examples.guess_number:GuessNumberEnv", "--model", "./model",
    ...       "--num-seeds", "256", "--steps", "20", "--output-dir", "outputs/run"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from trl_env.cli_eval import add_rollout_arguments, build_processor


@dataclass
class TrainSettings:
    """Hyper-parameters of a GRPO run (CPU-friendly defaults).

    Example:
        >>> TrainSettings(steps=5).batch_size
        16
    """

    steps: int = 20
    lr: float = 2e-4
    num_generations: int = 8
    prompts_per_step: int = 2
    lora_r: int = 16
    lora_alpha: int | None = None
    beta: float = 0.0
    temperature: float = 1.0
    max_turns: int = 8
    max_turn_tokens: int = 256
    max_completion_tokens: int = 1024
    system_prompt: str = ""
    max_minutes: float | None = None
    seed: int = 0
    output_dir: str = "outputs/train"
    report_to: str = "none"
    logging_steps: int = 1
    bf16: bool = False
    extra_args: dict[str, Any] = field(default_factory=dict)

    @property
    def batch_size(self) -> int:
        """Episodes per optimizer step."""
        return self.num_generations * self.prompts_per_step


class TimeLimit(TrainerCallback):
    """Stops training once another step would likely end past ``minutes`` of wall time.

    Example:
        >>> TimeLimit(0.5).budget_s
        30.0
    """

    def __init__(self, minutes: float) -> None:
        self.budget_s = 60.0 * minutes
        self.start: float | None = None
        self.step_times: list[float] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.start = self._last = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        now = time.perf_counter()
        self.step_times.append(now - self._last)
        self._last = now
        recent = self.step_times[-3:]
        expected = sum(recent) / len(recent)
        if now - (self.start or now) + 0.5 * expected >= self.budget_s:
            control.should_training_stop = True


class LogRecorder(TrainerCallback):
    """Keeps every log dict the trainer emits, with its step, for reward curves.

    Example:
        >>> LogRecorder().history
        []
    """

    def __init__(self) -> None:
        self.history: list[dict[str, Any]] = []

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if logs:
            self.history.append({"step": state.global_step, **logs})


def build_trainer(
    env_factory: Callable[[], Any],
    model: Any,
    tokenizer: Any,
    seeds: Sequence[str],
    settings: TrainSettings,
    *,
    processor: Any = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> Any:
    """A ready ``GRPOTrainer`` over ``seeds`` with trl-env's rollout function.

    With ``settings.lora_r > 0`` the model is wrapped in a LoRA adapter here (so the
    rollout generator and the trainer share it); episodes are sampled by
    :class:`~trl_env.caching_generators.EpisodeCacheGenerator` (the model's EOS ids and the
    processor's end-of-turn token stop a turn).
    ``settings.bf16`` trains and samples under bfloat16 autocast (about twice as fast on CPUs
    with AVX512-BF16/AMX; weights and LoRA parameters stay float32).

    Example:
        >>> settings = TrainSettings(steps=3)
        >>> trainer = build_trainer(GuessNumberEnv, model, tok, train_seeds(64), settings)  # doctest: +SKIP
        >>> trainer.train()  # doctest: +SKIP
    """
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from trl_env.caching_generators import EpisodeCacheGenerator
    from trl_env.chat_template_processor import ChatTemplateProcessor
    from trl_env.evaluation import autocast_context, stop_token_ids
    from trl_env.trl_glue import env_reward, make_rollout_func

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    needed = settings.steps * settings.prompts_per_step
    prompts = [seeds[i % len(seeds)] for i in range(max(needed, len(seeds)))]
    config = GRPOConfig(
        output_dir=settings.output_dir,
        per_device_train_batch_size=settings.batch_size,
        gradient_accumulation_steps=1,
        num_generations=settings.num_generations,
        max_completion_length=settings.max_completion_tokens,
        max_steps=settings.steps,
        learning_rate=settings.lr,
        beta=settings.beta,
        temperature=settings.temperature,
        logging_steps=settings.logging_steps,
        report_to=settings.report_to,
        save_strategy="no",
        use_cpu=not _has_accelerator(),
        bf16=settings.bf16,
        seed=settings.seed,
        data_seed=settings.seed,
        disable_tqdm=True,
        gradient_checkpointing=False,  # short episodes: memory is no issue, recomputation costs a third more
        **settings.extra_args,
    )
    if settings.lora_r > 0:
        from peft import LoraConfig, get_peft_model

        lora = LoraConfig(
            r=settings.lora_r,
            lora_alpha=settings.lora_alpha or 2 * settings.lora_r,
            target_modules="all-linear",
            lora_dropout=0.0,
            task_type="CAUSAL_LM",
        )
        model = get_peft_model(model, lora)
    processor = processor if processor is not None else ChatTemplateProcessor(tokenizer)
    generator = EpisodeCacheGenerator(
        model, tokenizer, temperature=settings.temperature,
        stop_token_ids=stop_token_ids(model, tokenizer, processor),
        model_context=autocast_context(model, torch.bfloat16 if settings.bf16 else None),
    )
    rollout_func = make_rollout_func(
        env_factory,
        processor,
        system_prompt=settings.system_prompt,
        max_turns=settings.max_turns,
        max_turn_tokens=settings.max_turn_tokens,
        generator=generator,
    )
    all_callbacks = list(callbacks)
    if settings.max_minutes is not None:
        all_callbacks.append(TimeLimit(settings.max_minutes))
    return GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=env_reward,
        args=config,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        rollout_func=rollout_func,
        callbacks=all_callbacks,
    )


def _has_accelerator() -> bool:
    import torch

    return torch.cuda.is_available()


def save_merged(trainer: Any, tokenizer: Any, output_dir: str | Path) -> Path:
    """Save the trained policy as a plain model directory (LoRA adapters merged in).

    Example:
        >>> save_merged(trainer, tokenizer, "outputs/run/final")  # doctest: +SKIP
        PosixPath('outputs/run/final')
    """
    model = trainer.model
    if hasattr(model, "merge_and_unload"):
        model = model.merge_and_unload()
    path = Path(output_dir)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``train`` subcommand."""
    parser = subparsers.add_parser("train", help="train a model on an environment with GRPO (TRL)")
    add_rollout_arguments(parser)
    parser.add_argument("--num-seeds", type=int, default=None,
                        help="training seeds train-0..train-{N-1} (default 1024)")
    parser.add_argument("--steps", type=int, default=20, help="optimizer steps (default 20)")
    parser.add_argument("--max-minutes", type=float, default=None, help="stop after this much training wall time")
    parser.add_argument("--lr", type=float, default=2e-4, help="learning rate (default 2e-4)")
    parser.add_argument("--num-generations", type=int, default=8, help="episodes per seed (GRPO group size)")
    parser.add_argument("--prompts-per-step", type=int, default=2, help="seeds per optimizer step (default 2)")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank on all linear layers; 0 = full fine-tuning")
    parser.add_argument("--lora-alpha", type=int, default=None, help="LoRA alpha (default 2 * rank)")
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient (default 0: no reference model)")
    parser.add_argument("--report-to", default="none", help="TRL/transformers report_to (default none)")
    parser.add_argument("--output-dir", default="outputs/train", help="where the merged model and logs go")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Load the model, train, save the merged model and the log history."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from trl_env.evaluation import load_factory, read_seeds

    factory = load_factory(args.env, json.loads(args.env_kwargs))
    num_seeds = args.num_seeds if args.num_seeds is not None else (None if args.seeds or args.seeds_file else 1024)
    seeds = read_seeds(args.seeds, args.seeds_file, num_seeds, default_prefix="train-")
    torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
    settings = TrainSettings(
        steps=args.steps, lr=args.lr, num_generations=args.num_generations, prompts_per_step=args.prompts_per_step,
        lora_r=args.lora_r, lora_alpha=args.lora_alpha, beta=args.beta, temperature=args.temperature,
        max_turns=args.max_turns, max_turn_tokens=args.max_turn_tokens,
        max_completion_tokens=args.max_completion_tokens, system_prompt=args.system_prompt,
        max_minutes=args.max_minutes, seed=args.seed, output_dir=args.output_dir, report_to=args.report_to,
        bf16=args.bf16,
    )
    recorder = LogRecorder()
    trainer = build_trainer(factory, model, tokenizer, seeds, settings,
                            processor=build_processor(args, tokenizer), callbacks=[recorder])
    trainer.train()
    path = save_merged(trainer, tokenizer, Path(args.output_dir) / "final")
    (Path(args.output_dir) / "log_history.json").write_text(json.dumps(recorder.history, indent=1))
    print(f"trained {trainer.state.global_step} steps; model saved to {path}")
    return 0
