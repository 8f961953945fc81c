"""History policies: tokens encoded per trained token and rollout wall time, full vs template vs window.

Per-turn samples (``history="template"``/``"window"``) render and tokenize every turn's prompt again, and the
model encodes whatever part of it the ``EpisodeCacheGenerator`` cannot reuse (a stored context that the new
prompt extends is reused; a template that drops old thinking or a sliding window breaks the prefix). ``full``
grows one sequence and re-encodes almost nothing. Two tasks: the demo's guess-the-number (5 turns) and a
long-horizon corridor (``--long-turns`` turns, ~15-token observations), with the tiny Qwen3 (random weights,
so every turn runs to ``max_turn_tokens``). Per trained token (the sampled, mask-1 tokens of the samples TRL
trains on): the context tokens the model encoded (fed through it, not reused from the cache), and the prompt
tokens the chat template rendered and tokenized (per-turn histories only: a CPU cost, no model cost).

Run: python benchmarks/history_policies.py [--episodes 8] [--long-turns 40] [--repeats 1]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Row, benchmark_model, cli, interleaved, log, median, set_threads  # noqa: E402

POLICIES = {"full": {}, "template": {"history": "template"}, "window k=4": {"history": "window", "history_window": 4}}


class Corridor:
    """A long-horizon task: ``turns`` rooms, one per model turn; each observation is a short room description."""

    turns = 40

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str):
        self.reward, self.alive, self.turn = 0.0, True, 0
        return self, f"You stand at the start of a corridor of {self.turns} rooms ({seed}). Walk on."

    def step(self, action: str):
        self.turn += 1
        self.reward += 1.0 / self.turns
        self.alive = self.turn < self.turns
        return self, f"Room {self.turn}: a grey room with a door to the east. Walk on."


def add_arguments(parser) -> None:
    parser.add_argument("--model", help="a local model folder (default: the tiny Qwen3)")
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--long-turns", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)


def measure(args) -> list[Row]:
    from examples.guess_number.env import GuessNumberEnv
    from trl_env import ChatTemplateProcessor, EpisodeCacheGenerator, RolloutConfig, RolloutEngine

    set_threads(args.threads)
    model, tokenizer = benchmark_model(args.model)
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    corridor = type("Corridor", (Corridor,), {"turns": args.long_turns})
    tasks = {
        "guess-the-number": (GuessNumberEnv, dict(max_turns=5, max_turn_tokens=16)),
        f"corridor ({args.long_turns} turns)": (corridor, dict(max_turns=args.long_turns, max_turn_tokens=8)),
    }
    seeds = [f"s-{i // 4}" for i in range(args.episodes)]
    rows = []
    for task, (env, budget) in tasks.items():
        figures: dict[str, list[tuple[float, float, int]]] = {name: [] for name in POLICIES}

        def side(name: str, settings: dict, env=env, budget=budget, figures=figures):
            config = RolloutConfig(env_isolation="thread", **budget, **settings)
            processor = ChatTemplateProcessor(tokenizer, per_turn=config.per_turn)

            def run():
                generator = EpisodeCacheGenerator(model, tokenizer, temperature=1.0, stop_token_ids=stop)
                engine = RolloutEngine(generator, processor, tokenizer, config)
                try:
                    episodes = engine.run(env, seeds)
                finally:
                    engine.close()
                fed = generator.stats.context_tokens - generator.stats.reused_tokens
                rendered = sum(len(s.prompt_ids) for e in episodes for s in e.turn_samples)
                trained = sum(sum(e.env_mask) for e in episodes)
                trained = max(trained, 1)
                figures[name].append((fed / trained, rendered / trained, sum(e.num_turns for e in episodes)))

            return run

        sides = {name: side(name, settings) for name, settings in POLICIES.items()}
        sides["full"]()  # warm-up (threads, allocator)
        figures["full"].clear()
        times = interleaved(sides, args.repeats)
        base = median(times["full"])
        for name in POLICIES:
            encoded = median([e for e, _, _ in figures[name]])
            rendered = median([r for _, r, _ in figures[name]])
            turns = median([t for _, _, t in figures[name]]) / args.episodes
            wall = median(times[name])
            log(f"{task} / {name}: {encoded:.2f} encoded per trained token, {wall:.1f} s")
            rows += [
                Row(f"{task} / {name}", "context tokens the model encoded per trained token", f"{encoded:.2f}"),
                Row(f"{task} / {name}", "prompt tokens rendered by the template per trained token", f"{rendered:.2f}"),
                Row(f"{task} / {name}", "rollout wall time", f"{wall:.1f} s ({wall / base:.2f}x full)"),
                Row(f"{task} / {name}", "turns per episode", f"{turns:.1f}"),
            ]
    return rows


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
