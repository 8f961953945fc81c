"""Env isolation: hung envs under a deadline, exit time, per-call overhead and worker start-up cost.

1. 32 episodes x 4 turns, each step taking 50 ms (90 %) or hanging (10 %), timeout 1 s, 32 workers:
   wall time per turn (target <= 1.5 s), for process and thread isolation.
2. The exit time of a process that did that work and returns with calls still hanging (target <= 2 s),
   measured in a subprocess (median of 3), next to a process that only imports trl-env.
3. Per-call overhead on an instant env: process vs thread isolation vs a direct call (us per call).
4. Process worker start-up (start + first reset) for forkserver, spawn and fork.
5. A training script written as users write them (torch, transformers and trl imported at the top, the env in
   a module of its own, guarded by ``if __name__ == "__main__":`` or not): rollout seconds of 32 episodes x 4
   turns on the tiny model, 16 workers (the default), under process and thread isolation (median of 3 runs).

Run: python benchmarks/env_isolation.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class LatencyEnv:
    """Each call sleeps as its action says (``"0.05"`` seconds, or ``"hang"``); ``"0"`` returns at once."""

    def __init__(self) -> None:
        self.reward, self.alive, self.turn = 0.0, True, 0

    def reset(self, seed: str) -> tuple[LatencyEnv, str]:
        return self, f"start {seed}"

    def step(self, action: str) -> tuple[LatencyEnv, str]:
        if action != "0":
            time.sleep(10**6 if action == "hang" else float(action))
        self.turn += 1
        return self, f"turn {self.turn}"


def hung_workload(isolation: str, episodes: int, turns: int, seed: int = 0) -> tuple[float, object]:
    """Turn-synchronous rollout like the engine's: seconds per turn, and the pool (left open)."""
    from trl_env.envpool.pool import EnvFault, EnvPool

    rng = random.Random(seed)
    pool = EnvPool(LatencyEnv, isolation=isolation, workers=episodes, timeout=1.0)
    slots = [pool.reset(str(i)) for i in range(episodes)]
    live = [slot for slot, future in slots if not isinstance(future.result(), EnvFault)]  # starts workers
    start = time.perf_counter()
    for _ in range(turns):
        actions = ["hang" if rng.random() < 0.1 else "0.05" for _ in live]
        futures = [pool.step(slot, action) for slot, action in zip(live, actions, strict=True)]
        replies = [future.result() for future in futures]
        for slot, reply in zip(live, replies, strict=True):
            if isinstance(reply, EnvFault):
                pool.release(slot)
        live = [slot for slot, reply in zip(live, replies, strict=True) if not isinstance(reply, EnvFault)]
    return (time.perf_counter() - start) / turns, pool


def overhead_us(isolation: str, calls: int) -> float:
    """Median-of-3 microseconds per sequential ``step`` on an instant env (``"direct"``: no pool)."""
    from trl_env.envpool.pool import EnvPool

    if isolation == "direct":
        env = LatencyEnv()
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                env.step("0")
            runs.append((time.perf_counter() - start) / calls * 1e6)
        return statistics.median(runs)
    with EnvPool(LatencyEnv, isolation=isolation, workers=1) as pool:
        slot, future = pool.reset("x")
        future.result()
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                pool.step(slot, "0").result()
            runs.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(runs)


def startup_s(method: str, starts: int) -> tuple[float, float]:
    """(first, median of the rest) seconds to start a process worker and get its first reset back."""
    import pickle

    from trl_env.envpool.backends import ProcessBackend, process_context
    from trl_env.envpool.replies import EnvReply

    context = process_context(method)
    times = []
    for _ in range(starts):
        start = time.perf_counter()
        backend = ProcessBackend(pickle.dumps(LatencyEnv), reuse=False, context=context)
        assert isinstance(backend.call("reset", "s", None), EnvReply)
        times.append(time.perf_counter() - start)
        backend.kill()
    return times[0], statistics.median(times[1:] or times)


def exit_seconds(args: list[str], repeats: int) -> tuple[float, float]:
    """Run this script with ``args`` in a subprocess: median seconds from its last printed time to its exit,
    and to the exit of every process holding its stdout (the forkserver exits once it sees its parent gone)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    exits, all_gone = [], []
    for _ in range(repeats):
        child = subprocess.Popen([sys.executable, __file__, *args], env=env, stdout=subprocess.PIPE, text=True)
        returned = float(child.stdout.readline())
        child.wait()
        exits.append(time.time() - returned)
        child.stdout.read()
        all_gone.append(time.time() - returned)
    return statistics.median(exits), statistics.median(all_gone)


USER_ENV = """
class Countdown:
    def reset(self, seed):
        self.reward, self.alive, self.next = 0.0, True, int(seed)
        return self, f"Count down from {seed}, one number per turn."

    def step(self, action):
        self.reward += action.strip() == str(self.next)
        self.next -= 1
        self.alive = self.next > 0
        return self, "Next." if self.alive else "Done."
"""

USER_SCRIPT = """
import sys
import time

import torch
import transformers  # noqa: F401
import trl  # noqa: F401
from countdown_env import Countdown

from trl_env import ChatTemplateProcessor, TransformersGenerator, rollout
from trl_env.testing import build_qwen3_tokenizer, build_tiny_qwen3_model

def main():
    torch.manual_seed(0)
    tokenizer = build_qwen3_tokenizer(sys.argv[2])
    generator = TransformersGenerator(build_tiny_qwen3_model(tokenizer), tokenizer)
    start = time.perf_counter()
    episodes = rollout(Countdown, ["4"] * 32, generator, ChatTemplateProcessor(tokenizer), env_isolation=sys.argv[1],
                       max_turns=4, max_turn_tokens=8, max_completion_tokens=200)
    print(time.perf_counter() - start, sum(e.failed for e in episodes), flush=True)
"""


def user_script_seconds(isolation: str, guarded: bool, tokenizer_cache: Path) -> tuple[float, int]:
    """(rollout seconds, failed episodes) of the user-style script, run as ``python train.py``."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "countdown_env.py").write_text(USER_ENV)
        body = USER_SCRIPT + ('\nif __name__ == "__main__":\n    main()\n' if guarded else "\nmain()\n")
        (Path(folder) / "train.py").write_text(body)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        result = subprocess.run(
            [sys.executable, "train.py", isolation, str(tokenizer_cache)],
            cwd=folder, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    seconds, failed = result.stdout.split()[-2:]
    return float(seconds), int(failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer episodes, calls and starts")
    parser.add_argument("--child", choices=["hang", "import"], help=argparse.SUPPRESS)
    parser.add_argument("--user-script-only", action="store_true", help="only measure 5 (the user-style script)")
    args = parser.parse_args()
    episodes, turns, calls, starts = (16, 2, 300, 3) if args.quick else (32, 4, 3000, 6)
    if args.child:  # the subprocess of the exit-time measurement
        if args.child == "hang":
            _, pool = hung_workload("process", episodes, 1)
            pool.step(pool.reset("last")[0], "hang")  # and one call surely hanging as we return
            time.sleep(0.2)
        else:
            import trl_env.envpool.pool  # noqa: F401
        print(time.time(), flush=True)
        return
    cache = Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache")) / "qwen3-tokenizer"
    print("| user-style script, 32 episodes x 4 turns | process: s (failed) | thread: s (failed) |\n|---|---|---|")
    for guarded in (False, True):
        cells = []
        for mode in ("process", "thread"):  # the median of 3 runs: a 1 s rollout is easily disturbed
            runs = [user_script_seconds(mode, guarded, cache) for _ in range(3)]
            cells.append((statistics.median(seconds for seconds, _ in runs), max(failed for _, failed in runs)))
        text = " | ".join(f"{seconds:.1f} ({failed})" for seconds, failed in cells)
        print(f"| {'guarded' if guarded else 'unguarded'} | {text} |", flush=True)
    if args.user_script_only:
        return

    print("| start method | first worker (s) | next workers (s, median) |\n|---|---|---|")
    for method in ("forkserver", "spawn", "fork"):  # forkserver first: its first worker includes the server's boot
        first, rest = startup_s(method, starts if method != "spawn" else 2)
        print(f"| {method} | {first:.3f} | {rest:.3f} |", flush=True)
    rows = [("\n| measure | process | thread | direct |", "|---|---|---|---|")]
    per_turn = {mode: hung_workload(mode, episodes, turns) for mode in ("process", "thread")}
    for _, pool in per_turn.values():
        pool.close()
    rows.append((f"| s per turn, {episodes} eps x {turns} turns, 10 % hang, timeout 1 s (<= 1.5) | "
                 f"{per_turn['process'][0]:.2f} | {per_turn['thread'][0]:.2f} | |",))  # fmt: skip
    costs = {mode: overhead_us(mode, calls) for mode in ("process", "thread", "direct")}
    rows.append((f"| us per call, instant env | {costs['process']:.0f} | {costs['thread']:.0f} | "
                 f"{costs['direct']:.1f} |",))  # fmt: skip
    repeats = 1 if args.quick else 3
    (hung, hung_all), (imports, _) = (
        exit_seconds(["--child", child, *["--quick"] * args.quick], repeats) for child in ("hang", "import")
    )
    rows.append((f"| s to exit after returning with hung calls (<= 2) | {hung:.2f} | | |",))
    rows.append((f"| s until its forkserver is gone too | {hung_all:.2f} | | |",))
    rows.append((f"| s to exit, a process that only imports trl-env | {imports:.2f} | | |",))
    print("\n".join(line for row in rows for line in row))


if __name__ == "__main__":
    main()
