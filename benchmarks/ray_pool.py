"""The Ray env pool against the process pool: per-call overhead on an instant env, and a rollout of many
concurrent envs whose calls sleep 1 s on a two-node loopback cluster (wall time against the slowest episode's
own env time plus generation).

    python benchmarks/ray_pool.py --calls 500 --envs 256 --turns 2
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def per_call_us(isolation: str, calls: int) -> float:
    """Mean µs of one ``step`` on an instant env (the worker is started first: its start-up is not timed)."""
    from tests.envs.basic import Counting
    from trl_env.envpool.pool import EnvPool

    settings = {"ray_resources": {"num_cpus": 0}} if isolation == "ray" else {}
    with EnvPool(Counting, isolation=isolation, workers=1, timeout=30.0, **settings) as pool:
        slot, first = pool.reset("a")
        first.result()
        start = time.perf_counter()
        for _ in range(calls):
            pool.step(slot, "x").result()
        return (time.perf_counter() - start) / calls * 1e6


def rollout(envs: int, turns: int, rounds: int = 2) -> list[float]:
    """Wall time of ``envs`` episodes at once whose every call sleeps 1 s, once per round on the same actors.

    The actors are started and warmed first (one instant episode each); the first timed round may still pay for
    Ray's lazy work (leases, connections), the later ones show the steady state.
    """
    from tests.engine.hostile_envs import Hostile
    from trl_env.envpool.pool import EnvPool

    walls = []
    with EnvPool(Hostile, isolation="ray", workers=envs, timeout=60.0, ray_resources={"num_cpus": 0}) as pool:
        start = time.perf_counter()
        warm = [pool.reset("ok") for _ in range(envs)]  # the actors start before the clock does
        for slot, reply in warm:
            reply.result()
            pool.release(slot).result()
        print(f"{envs} actors started and warmed in {time.perf_counter() - start:.1f} s", flush=True)
        for _ in range(rounds):
            start = time.perf_counter()
            slots = [pool.reset("sleep:1") for _ in range(envs)]
            for _ in range(turns - 1):
                for _slot, reply in slots:
                    reply.result()
                slots = [(slot, pool.step(slot, "sleep:1")) for slot, _ in slots]
            for _slot, reply in slots:
                reply.result()
            walls.append(time.perf_counter() - start)
            for slot, _ in slots:
                pool.release(slot).result()
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--turns", type=int, default=2)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    cluster.add_node(num_cpus=2)
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    try:
        print(f"per call, instant env: process {per_call_us('process', args.calls):.0f} µs, "
              f"ray {per_call_us('ray', args.calls):.0f} µs")  # fmt: skip
        for number, wall in enumerate(rollout(args.envs, args.turns), 1):
            print(f"round {number}: {args.envs} envs x {args.turns} calls of 1 s on 2 loopback nodes: wall "
                  f"{wall:.2f} s, the slowest episode's env time {args.turns:.2f} s (+ instant generation): "
                  f"{wall / args.turns:.2f}x")  # fmt: skip
    finally:
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main()
