"""Slow environments must not serialise a batch.

32 episodes whose env sleeps 100 ms per step (and at reset), 4 turns, an instant generator:
the time per turn with a pool of 32 workers against one worker (sequential env calls).

Run: python benchmarks/env_concurrency.py [--episodes 32] [--sleep 0.1] [--turns 4]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.testing import InstantGenerator, build_qwen3_tokenizer

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "qwen3-tokenizer"


class SleepyEnv:
    """Sleeps ``delay`` seconds in every call, like an env talking to a remote service."""

    delay = 0.1

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str) -> tuple[SleepyEnv, str]:
        time.sleep(self.delay)
        return self, f"start {seed}"

    def step(self, action: str) -> tuple[SleepyEnv, str]:
        time.sleep(self.delay)
        self.turn += 1
        return self, f"turn {self.turn}"


def seconds_per_turn(engine: RolloutEngine, episodes: int, turns: int) -> float:
    """Wall time of a rollout divided by its turns (reset counted as one turn)."""
    start = time.perf_counter()
    engine.run(SleepyEnv, [str(i) for i in range(episodes)])
    return (time.perf_counter() - start) / (turns + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--sleep", type=float, default=0.1)
    parser.add_argument("--turns", type=int, default=4)
    args = parser.parse_args()
    SleepyEnv.delay = args.sleep
    tokenizer = build_qwen3_tokenizer(CACHE)
    processor = ChatTemplateProcessor(tokenizer)
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    rows = []
    for workers in (args.episodes, 1):
        generator = InstantGenerator(range(100, 5000), stop_id=stop, stop_prob=0.3)
        config = RolloutConfig(max_turns=args.turns, max_turn_tokens=8, max_completion_tokens=4096, env_workers=workers)
        rows.append(
            (
                workers,
                seconds_per_turn(RolloutEngine(generator, processor, tokenizer, config), args.episodes, args.turns),
            )
        )
    print(f"{args.episodes} episodes x {args.turns} turns, env sleeps {args.sleep * 1000:.0f} ms per call")
    print(f"{'env workers':>12} {'s per turn':>11} {'x one step':>11}")
    for workers, per_turn in rows:
        print(f"{workers:>12} {per_turn:>11.3f} {per_turn / args.sleep:>11.2f}")
    concurrent, sequential = rows[0][1], rows[1][1]
    print(
        f"speed-up from concurrent env calls: {sequential / concurrent:.1f}x "
        f"(target: turn time close to one step's {args.sleep:.2f} s)"
    )


if __name__ == "__main__":
    main()
