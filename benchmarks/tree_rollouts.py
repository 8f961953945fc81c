"""Tree rollouts: sampled tokens and sampling time per trained sample, with and without shared prefixes.

32 trained samples of guess-the-number (5 turns, 16 tokens per turn) from 8 prompts: plain GRPO plays 32
episodes; tree 1x4 plays 8 roots and forks each after turn 1 into 4 branches; tree 1,2x2 forks after turns 1
and 2 into 2. Every sample is a whole episode for the trainer, but a shared prefix is sampled once; with
``EpisodeCacheGenerator`` a fork's prefix is also never re-encoded (its keys and values are reused).

Run: python benchmarks/tree_rollouts.py [--model .cache/smollm2-135m-instruct] [--repeats 3]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Row, benchmark_model, cli, interleaved, log, median, set_threads  # noqa: E402

SHAPES = {"plain": None, "tree 1x4": "1x4", "tree 1,2x2": "1,2x2"}


def add_arguments(parser) -> None:
    parser.add_argument("--model", help="a local model folder (default: the tiny Qwen3)")
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)


def measure(args) -> list[Row]:
    from examples.guess_number.env import GuessNumberEnv
    from trl_env import ChatTemplateProcessor, EpisodeCacheGenerator, RolloutConfig, RolloutEngine
    from trl_env.engine.tree import TreeShape

    set_threads(args.threads)
    model, tokenizer = benchmark_model(args.model)
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    generator = EpisodeCacheGenerator(model, tokenizer, temperature=1.0, stop_token_ids=stop)
    seeds = [f"train-{i // 4}" for i in range(args.samples)]  # 8 prompts x 4 samples, as TRL repeats them
    figures: dict[str, list[tuple[int, float, float]]] = {name: [] for name in SHAPES}

    def side(name: str, shape: str | None):
        config = RolloutConfig(
            max_turns=5, max_turn_tokens=16, tree=TreeShape.parse(shape) if shape else None, env_isolation="thread"
        )
        engine = RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, config)

        def run():
            before = (generator.stats.reused_tokens, generator.stats.context_tokens)
            episodes = engine.run(GuessNumberEnv, seeds)
            assert len(episodes) == len(seeds)
            reused = generator.stats.reused_tokens - before[0]
            context = generator.stats.context_tokens - before[1]
            figures[name].append((engine.stats.sampled_tokens, engine.stats.generate_s, reused / max(context, 1)))

        return run

    sides = {name: side(name, shape) for name, shape in SHAPES.items()}
    sides["plain"]()  # warm-up
    for values in figures.values():
        values.clear()
    times = interleaved(sides, args.repeats)
    rows = []
    plain_tokens = median([t for t, _, _ in figures["plain"]]) / args.samples
    for name in SHAPES:
        tokens = median([t for t, _, _ in figures[name]]) / args.samples
        generate_s = median([g for _, g, _ in figures[name]]) / args.samples
        reuse = median([r for _, _, r in figures[name]])
        wall = median(times[name]) / args.samples
        log(f"{name}: {tokens:.1f} tokens/sample, {generate_s * 1000:.0f} ms generating/sample")
        rows += [
            Row(name, "sampled tokens per trained sample", f"{tokens:.1f} ({tokens / plain_tokens:.2f}x plain)"),
            Row(name, "generator time per sample", f"{generate_s * 1000:.0f} ms"),
            Row(name, "rollout wall time per sample", f"{wall * 1000:.0f} ms"),
            Row(name, "context tokens not re-encoded (kv reuse)", f"{reuse:.0%}"),
        ]
    return rows


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
