"""The env pool on a Ray cluster (``isolation="ray"``): the process backend's guarantees, on two loopback nodes.

Every test runs on the session's two-node cluster (``ray_cluster`` in conftest.py) with the hostile envs of the
other pool tests; a local instance started by the pool itself, the import and exit checks run in a fresh process.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.engine.hostile_envs import Hostile, events
from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.envpool.pool import EnvFault, EnvPool, EnvReply
from trl_env.errors import BackendError, ConfigError
from trl_env.testing import InstantGenerator

pytest.importorskip("ray")
ROOT = Path(__file__).resolve().parents[2]
FREE = {"num_cpus": 0}  # placed anywhere, holds no CPU: the cluster's 4 logical CPUs cap nothing here


def _pool(ray_cluster, factory=Hostile, **settings) -> EnvPool:
    settings = {"workers": 2, "timeout": 5.0, "ray_resources": FREE, **settings}
    return EnvPool(factory, isolation="ray", **settings)


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` (an actor on a loopback node: this machine) is gone, or a zombie, within a while."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status")
        if not status.exists() or "State:\tZ" in status.read_text():
            return True
        time.sleep(0.1)
    return False


def test_envs_that_hold_a_cpu_each_fill_both_nodes(ray_cluster):
    # SPREAD is Ray's best effort: actors that hold nothing may all land on one node of a loaded machine. Four
    # actors of one CPU each on two nodes of two CPUs have one placement only, two on each node.
    with _pool(ray_cluster, workers=4, ray_resources={"num_cpus": 1}) as pool:
        slots = [pool.reset("ok") for _ in range(4)]
        assert all(isinstance(future.result(), EnvReply) for _, future in slots)
        nodes = [slot.node for slot, _ in slots]
        assert sorted(nodes) == sorted([ray_cluster.head_id] * 2 + [ray_cluster.worker_id] * 2)


def test_a_late_call_kills_only_its_actor(ray_cluster):
    with _pool(ray_cluster, workers=4, timeout=1.0) as pool:
        slots = [pool.reset("ok") for _ in range(4)]
        assert all(isinstance(future.result(), EnvReply) for _, future in slots)
        assert {slot.node for slot, _ in slots} <= {ray_cluster.head_id, ray_cluster.worker_id}
        hung_pid = pool._state.workers[0].backend.pid
        start = time.perf_counter()
        commands = ["hang", "sleep:0.2", "raise:ValueError", "ok"]
        futures = [pool.step(slot, command) for (slot, _), command in zip(slots, commands, strict=True)]
        results = [future.result() for future in futures]
        assert time.perf_counter() - start < 3.0
        assert results[0] == EnvFault("timeout", "step took longer than 1.0 s")
        assert results[1] == EnvReply("sleep:0.2 done (turn 1)", 1.0, True)  # healthy ones are never blamed
        assert results[2] == EnvFault("exception", "ValueError: bad seed")
        assert results[3] == EnvReply("ok done (turn 1)", 1.0, True)
        assert _gone(hung_pid)  # ray.kill: the hung call's process is really gone
        assert pool.step(slots[0][0], "ok").result() == results[0] and pool.release(slots[0][0]).result() is None
        assert pool.release(slots[1][0]).result() == {"turns": 1.0, "reward": 1.0}
        again, first = pool.reset("after")  # the lost worker gets a fresh actor
        assert first.result() == EnvReply("after done (turn 0)", 0.0, True) and again.node is not None


def test_an_actor_stopped_by_sigterm_mid_call_dies_and_is_replaced(ray_cluster):
    # A node shutting down sends its actors SIGTERM; Ray raises SystemExit inside the env's code, which the host
    # would catch as the env's own fault and the actor would live on.
    with _pool(ray_cluster, workers=1) as pool:
        slot, first = pool.reset("ok")
        assert isinstance(first.result(), EnvReply)
        pid = pool._state.workers[0].backend.pid
        step = pool.step(slot, "sleep:5")
        time.sleep(1.0)
        os.kill(pid, signal.SIGTERM)
        fault = step.result()
        assert fault.kind == "crash" and fault.message.startswith("Ray actor died during step"), fault
        assert _gone(pid) and pool.release(slot).result() is None
        assert pool.reset("next")[1].result() == EnvReply("next done (turn 0)", 0.0, True)
        assert pool._state.workers[0].backend.pid != pid


@pytest.mark.parametrize(("command", "pid_gone"), [("os_exit", True), ("segv", True)])
def test_an_actor_that_dies_fails_only_its_episode(ray_cluster, command, pid_gone):
    with _pool(ray_cluster) as pool:
        (dying, _), (healthy, _) = pool.reset("ok"), pool.reset("ok")
        died, slow = pool.step(dying, command), pool.step(healthy, "sleep:0.3")
        fault = died.result()
        assert fault.kind == "crash" and fault.message.startswith("Ray actor died during step")
        assert slow.result() == EnvReply("sleep:0.3 done (turn 1)", 1.0, True)
        assert pool.step(dying, "ok").result() == fault and pool.release(dying).result() is None
        assert pool.release(healthy).result() == {"turns": 1.0, "reward": 1.0}
        assert pool.reset("next")[1].result() == EnvReply("next done (turn 0)", 0.0, True)


def test_warm_reuse_metrics_and_close_run_in_the_actor(ray_cluster, tmp_path):
    log = tmp_path / "events.log"  # the loopback nodes share this machine's files
    with _pool(ray_cluster, functools.partial(Hostile, str(log)), workers=1, reuse_envs=True) as pool:
        for seed in ("a", "b", "c"):
            slot, reply = pool.reset(seed)
            assert reply.result().alive and pool.step(slot, "ok").result().reward == 1.0
            assert pool.release(slot).result() == {"turns": 1.0, "reward": 1.0}
    assert events(log) == ["factory"] + ["reset", "metrics"] * 3 + ["close"]  # one env, warm-reset twice


def test_a_fork_continues_a_copy_in_another_actor(ray_cluster):
    with _pool(ray_cluster, timeout=1.0) as pool:
        slot, _ = pool.reset("root")
        assert pool.step(slot, "ok").result().reward == 1.0
        branch, forked = pool.fork(slot)
        assert forked.result() == EnvReply("", 1.0, True) and branch.forked_from == slot.index
        assert pool.step(branch, "left").result() == EnvReply("left done (turn 2)", 2.0, True)
        assert pool.step(branch, "on").result() == EnvReply("on done (turn 3)", 3.0, True)
        assert pool.step(slot, "right").result() == EnvReply("right done (turn 2)", 2.0, True)
        assert pool.step(slot, "hang").result().kind == "timeout"
        lost, copy = pool.fork(slot)
        assert copy.result().kind == "timeout"  # a lost env makes a lost copy, at once
        for each in (slot, branch, lost):
            pool.release(each)


def test_a_tree_rollout_runs_on_ray(ray_cluster, qwen3_tokenizer):
    from trl_env.engine.tree import TreeShape

    engine = _engine(qwen3_tokenizer, max_turns=2, env_workers=4, tree=TreeShape((1,), 2))
    try:
        episodes = engine.run(Hostile, ["x", "x", "y", "y"])
    finally:
        engine.close()
    assert [e.stop_reason for e in episodes] == ["max_turns"] * 4 and all(not e.failed for e in episodes)


def _engine(tokenizer, **config) -> RolloutEngine:
    generator = InstantGenerator(range(100, 3000), stop_id=tokenizer.convert_tokens_to_ids("<|im_end|>"))
    settings = {"env_isolation": "ray", "ray_resources": FREE, "max_turn_tokens": 4, **config}
    return RolloutEngine(generator, ChatTemplateProcessor(tokenizer), tokenizer, RolloutConfig(**settings))


def test_a_node_lost_mid_rollout_fails_its_episodes_and_the_rest_finish(ray_cluster, qwen3_tokenizer):
    doomed = ray_cluster.add_node()
    for _attempt in range(5):  # SPREAD is best effort: a node that just joined may not be in the scheduler's view
        engine = _engine(qwen3_tokenizer, max_turns=1, env_workers=8, env_timeout=30.0)
        assert not any(e.failed for e in engine.run(Hostile, ["ok"] * 8))  # warm: 8 actors, spread over 3 nodes
        if doomed.node_id in engine._pool.nodes:
            break
        engine.close()
        time.sleep(2.0)
    try:
        assert doomed.node_id in engine._pool.nodes, engine._pool.nodes  # the precondition: some on the new node
        episodes: list = []
        rollout = threading.Thread(target=lambda: episodes.extend(engine.run(Hostile, ["sleep:2"] * 8)))
        rollout.start()
        time.sleep(0.5)  # every reset sleeps in its (warm) actor now
        workers = engine._pool._state.workers
        by_slot = {w.slot.index: w.backend.node_id for w in workers}  # episode i is the run's i-th slot
        nodes = [node for _, node in sorted(by_slot.items())]
        assert len(nodes) == 8 and doomed.node_id in nodes
        ray_cluster.cluster.remove_node(doomed)
        rollout.join(timeout=60)
        assert not rollout.is_alive()
        for episode, node in zip(episodes, nodes, strict=True):
            if node == doomed.node_id:
                assert episode.stop_reason == "env_error" and "crash" in episode.error, episode.error
            else:
                assert not episode.failed, episode.error
        again = engine.run(Hostile, ["ok"] * 8)  # training goes on: the lost workers' new actors on live nodes
        assert not any(e.failed for e in again) and doomed.node_id not in engine._pool.nodes
    finally:
        engine.close()


def test_resources_no_node_can_hold_are_one_error_before_any_episode(ray_cluster, qwen3_tokenizer):
    start = time.perf_counter()
    with pytest.raises(BackendError, match=r"no node of the Ray cluster can ever hold one env: it needs .*sandbox"):
        EnvPool(Hostile, isolation="ray", ray_resources={"num_cpus": 1, "resources": {"sandbox": 1}})
    engine = _engine(qwen3_tokenizer, max_turns=1, ray_resources={"num_cpus": 64})
    with pytest.raises(BackendError, match=r"needs \{'CPU': 64\}.*: CPU=2"):
        engine.run(Hostile, ["ok"])
    assert time.perf_counter() - start < 5.0
    with pytest.raises(ConfigError, match="unknown key 'cpus'"):
        RolloutConfig(env_isolation="ray", ray_resources={"cpus": 1})


def test_parallel_calls_overlap_across_actors(ray_cluster):
    with _pool(ray_cluster, workers=4) as pool:
        slots = [pool.reset("ok") for _ in range(4)]
        slots = [slot for slot, reply in slots if reply.result()]  # the actors are up: their start-up is not timed
        start = time.perf_counter()
        with ThreadPoolExecutor(4) as executor:
            replies = list(executor.map(lambda slot: pool.step(slot, "sleep:1").result(), slots))
        assert time.perf_counter() - start < 1.9 and all(isinstance(r, EnvReply) for r in replies)


LOCAL_RUN = """
    import sys, time
    import trl_env
    assert "ray" not in sys.modules, "import trl_env imported ray"
    from tests.engine.hostile_envs import Hostile
    from trl_env.envpool.pool import EnvPool
    from trl_env.errors import BackendError
    start = time.time()
    try:
        EnvPool(Hostile, isolation="ray", ray_address="127.0.0.1:9")
    except BackendError as error:
        print(f"{time.time() - start:.1f}", error, flush=True)
    pool = EnvPool(Hostile, isolation="ray", workers=2, timeout=None, ray_resources={"num_cpus": 0})
    futures = [pool.reset(seed)[1] for seed in ("hang", "wait_forever")]
    while any(worker.backend is None or worker.backend.pid is None for worker in pool._state.workers):
        time.sleep(0.05)
    time.sleep(0.3)
    print(*[worker.backend.pid for worker in pool._state.workers], flush=True)
    print(time.time(), flush=True)
"""


def test_a_local_instance_an_unreachable_cluster_and_calls_that_never_return(tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    env.pop("RAY_ADDRESS", None)
    with open(tmp_path / "stderr", "w") as stderr:  # a file, not a pipe: Ray's logs must never block the child
        child = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(LOCAL_RUN)], env=env, cwd=ROOT, text=True,
            stdout=subprocess.PIPE, stderr=stderr, timeout=120,
        )  # fmt: skip
    exited = time.time()
    assert child.returncode == 0, (tmp_path / "stderr").read_text()[-3000:]
    unreachable, pids, returned = child.stdout.splitlines()[:3]
    took, message = unreachable.split(" ", 1)
    assert float(took) < 6.0 and "cannot reach the Ray cluster at 127.0.0.1:9" in message, message
    assert exited - float(returned) < 10.0  # Ray's own shutdown of the local instance is most of it
    assert all(_gone(int(pid)) for pid in pids.split())  # the hung actors died with their owner
