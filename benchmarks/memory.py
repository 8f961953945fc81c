"""Memory: peak RSS of a rollout of 64 episodes x 16 turns, and the bookkeeping bytes per episode.

* ``InstantGenerator`` rollout: the process's resident set before the rollout, its peak
  during it (the kernel's high-water mark, reset just before with ``/proc/self/clear_refs``),
  and the bytes Python allocated for the returned episodes (``tracemalloc``, a second run),
  per episode and per token.
* The same rollout with the tiny Qwen3 model and ``TransformersGenerator`` (8 sampled tokens
  per turn to keep it cheap), and with sampling through ``model.generate`` + ``output_logits``
  as before the fix (its full-vocabulary logits of every step are what the fix removed; that
  peak is per generate call, so ``--before-fix-turns`` 4 turns show it at a quarter of the cost).

Each figure is measured in a fresh subprocess so that one measurement's peak cannot hide
another's.

Run: python benchmarks/memory.py [--episodes 64] [--turns 16] [--no-model]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Row, cli, env_with_turns, instant_generator, log, qwen3_tokenizer, set_threads  # noqa: E402


def _rss_now() -> int:
    import psutil

    return psutil.Process().memory_info().rss


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def one(kind: str, episodes: int, turns: int, turn_tokens: int) -> dict:
    """Measure one rollout in this process; ``kind`` is instant, model or model-generate."""
    from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine, TransformersGenerator

    set_threads(1)
    tokenizer = qwen3_tokenizer()
    processor = ChatTemplateProcessor(tokenizer)
    env = env_with_turns(turns)
    config = RolloutConfig(max_turns=turns, max_turn_tokens=turn_tokens, max_completion_tokens=1 << 20)
    if kind == "instant":
        generator = instant_generator(tokenizer)
    else:
        from benchmarks.common import tiny_model

        model = tiny_model(tokenizer)
        generator = TransformersGenerator(model, tokenizer)
        if kind == "model-generate":
            from benchmarks.batched_vs_sequential import _model_generate_generator

            generator = _model_generate_generator(model, tokenizer)
    engine = RolloutEngine(generator, processor, tokenizer, config)
    seeds = [str(i) for i in range(episodes)]
    engine.run(env, seeds[:2])  # warm-up: first-call allocations are not the rollout's
    import gc

    gc.collect()
    before = _rss_now()
    exact = _reset_peak()
    start = time.perf_counter()
    result = engine.run(env, seeds)
    seconds = time.perf_counter() - start
    peak = _peak_rss()
    tokens = sum(len(e.prompt_ids) + len(e.completion_ids) for e in result)
    out = {"before": before, "peak": peak, "exact_peak": exact, "seconds": seconds, "tokens": tokens}
    del result
    if kind == "instant":
        import tracemalloc

        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        kept = engine.run(env, seeds)
        gc.collect()
        out["episode_bytes"] = (tracemalloc.get_traced_memory()[0] - base) / len(kept)
        out["tokens_per_episode"] = sum(len(e.prompt_ids) + len(e.completion_ids) for e in kept) / len(kept)
        tracemalloc.stop()
    return out


def _subprocess(kind: str, args, turns: int) -> dict:
    command = [sys.executable, __file__, "--one", kind, "--episodes", str(args.episodes), "--turns", str(turns)]
    command += ["--turn-tokens", str(args.turn_tokens if kind == "instant" else args.model_turn_tokens)]
    log(f"memory: {kind} rollout, {args.episodes} episodes x {turns} turns")
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def add_arguments(parser) -> None:
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--turns", type=int, default=16)
    parser.add_argument("--turn-tokens", type=int, default=16)
    parser.add_argument("--model-turn-tokens", type=int, default=8)
    parser.add_argument("--no-model", action="store_true")
    parser.add_argument("--before-fix-turns", type=int, default=4, help="0: skip the model.generate rollout")
    parser.add_argument("--one", help=argparse.SUPPRESS)


def measure(args) -> list[Row]:
    mib = 1 << 20
    size = f"{args.episodes} x {args.turns}"
    instant = _subprocess("instant", args, args.turns)
    rows = [
        Row(
            "5 memory",
            f"peak RSS, InstantGenerator rollout {size} (16 tokens per turn)",
            f"{instant['peak'] / mib:.0f} MiB (+{(instant['peak'] - instant['before']) / mib:.0f} MiB over the "
            f"{instant['before'] / mib:.0f} MiB before the rollout)",
        ),
        Row(
            "5 memory",
            "bookkeeping per episode (tracemalloc: Episode, ids, mask, logprobs, turns, text)",
            f"{instant['episode_bytes'] / 1024:.0f} KiB per episode, "
            f"{instant['episode_bytes'] / instant['tokens_per_episode']:.0f} B per token "
            f"({instant['tokens_per_episode']:.0f} tokens)",
        ),
    ]
    if not args.no_model:
        runs = [("model", "TransformersGenerator", args.turns)]
        if args.before_fix_turns:
            runs.append(("model-generate", "sampling via model.generate (before the fix)", args.before_fix_turns))
        for kind, label, turns in runs:
            result = _subprocess(kind, args, turns)
            rows.append(
                Row(
                    "5 memory",
                    f"peak RSS, tiny Qwen3 rollout {args.episodes} x {turns} ({args.model_turn_tokens} tokens per "
                    f"turn), {label}",
                    f"{result['peak'] / mib:.0f} MiB (+{(result['peak'] - result['before']) / mib:.0f} MiB; "
                    f"{result['seconds']:.1f} s)",
                )
            )
    if not instant["exact_peak"]:
        rows[0].notes.append("peak RSS is the whole process's (ru_maxrss): /proc/self/clear_refs is not writable")
    return rows


if __name__ == "__main__":
    if "--one" in sys.argv:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        options = parser.parse_args()
        print(json.dumps(one(options.one, options.episodes, options.turns, options.turn_tokens)))
    else:
        cli(__doc__, add_arguments, measure)
