"""Overhead: what trl-env does around generation, per episode-turn and as a share of a real rollout.

The same rollout (32 episodes x 4 turns of 16 tokens, the tiny Qwen3 model, one torch
thread) is played with ``InstantGenerator`` (random tokens, no model) and with
``TransformersGenerator``, interleaved. The generator is wrapped to time its calls, so:

* instant rollout: engine overhead = wall time - time inside the generator (tokenizing env
  chunks, bookkeeping, env calls in the thread pool, decoding and parsing answers, the
  invariant checks at the end);
* share = that overhead / the real rollout's wall time (target <= 5 %);
* real rollout: wall time - time inside ``TransformersGenerator.generate``, the same overhead
  measured in place.

Run: python benchmarks/overhead.py [--episodes 32] [--turns 4] [--repeats 3] [--instant-repeats 10]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    Row,
    cli,
    env_with_turns,
    instant_generator,
    log,
    median,
    qwen3_tokenizer,
    set_threads,
    tiny_model,
)

TARGET = 0.05


class TimedGenerator:
    """Wraps a generator and adds up the seconds spent in its ``generate`` calls."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls: list[tuple[float, float]] = []  # (start, end) of each call, perf_counter

    def generate(self, contexts, max_new_tokens):
        start = time.perf_counter()
        try:
            return self.inner.generate(contexts, max_new_tokens)
        finally:
            end = time.perf_counter()
            self.seconds += end - start
            self.calls.append((start, end))

    def reset(self) -> None:
        self.seconds = 0.0
        self.calls = []


def run_timed(engine, env, seeds) -> tuple[float, float]:
    """(wall seconds, seconds inside the generator) of one rollout."""
    engine.generator.reset()
    start = time.perf_counter()
    engine.run(env, seeds)
    return time.perf_counter() - start, engine.generator.seconds


def add_arguments(parser) -> None:
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--instant-repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)


def measure(args) -> list[Row]:
    from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine, TransformersGenerator

    set_threads(args.threads)
    tokenizer = qwen3_tokenizer()
    model = tiny_model(tokenizer)
    processor = ChatTemplateProcessor(tokenizer)
    env = env_with_turns(args.turns)
    config = RolloutConfig(max_turns=args.turns, max_turn_tokens=args.turn_tokens, max_completion_tokens=1 << 20)
    real = RolloutEngine(TimedGenerator(TransformersGenerator(model, tokenizer)), processor, tokenizer, config)
    instant = RolloutEngine(TimedGenerator(instant_generator(tokenizer)), processor, tokenizer, config)
    seeds = [str(i) for i in range(args.episodes)]
    real.run(env, seeds[:2])
    instant.run(env, seeds[:2])

    real_wall, real_outside, instant_overhead, instant_wall = [], [], [], []
    log(f"overhead: {args.episodes} episodes x {args.turns} turns, {args.repeats} rounds")
    for _ in range(args.repeats):
        for _ in range(args.instant_repeats):
            wall, inside = run_timed(instant, env, seeds)
            instant_wall.append(wall)
            instant_overhead.append(wall - inside)
        wall, inside = run_timed(real, env, seeds)
        real_wall.append(wall)
        real_outside.append(wall - inside)

    episode_turns = args.episodes * args.turns
    overhead = median(instant_overhead)
    wall = median(real_wall)
    share = overhead / wall
    in_place = median(real_outside)
    return [
        Row(
            "2 overhead",
            f"engine time per episode-turn, InstantGenerator ({args.episodes} x {args.turns})",
            f"{overhead / episode_turns * 1e6:.0f} us (rollout {median(instant_wall) * 1e3:.0f} ms, "
            f"of which generator {(median(instant_wall) - overhead) * 1e3:.0f} ms)",
        ),
        Row(
            "2 overhead",
            "engine time / real rollout wall time (TransformersGenerator, same rollout)",
            f"{share:.1%} ({overhead * 1e3:.0f} ms / {wall:.2f} s)",
            f"<= {TARGET:.0%}",
            share <= TARGET,
        ),
        Row(
            "2 overhead",
            "real rollout: time outside generate() / wall time",
            f"{in_place / wall:.1%} ({in_place * 1e3:.0f} ms, {in_place / episode_turns * 1e6:.0f} us / episode-turn)",
            f"<= {TARGET:.0%}",
            in_place / wall <= TARGET,
        ),
    ]


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
