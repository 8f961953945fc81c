"""EnvPool: deadlines, isolation, faults, contract errors, release/close and clean exits, in both modes."""

from __future__ import annotations

import doctest
import functools
import gc
import importlib
import os
import pickle
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

import pytest

from tests.engine.hostile_envs import (
    PICKLED,
    CountsPickles,
    Handover,
    Hostile,
    Plain,
    events,
    not_an_env,
    plain_with,
    raising_factory,
)
from trl_env import ChatTemplateProcessor, RolloutConfig, RolloutEngine
from trl_env.envpool.backends import ProcessBackend, WorkerLost
from trl_env.envpool.pool import EnvContractError, EnvFault, EnvPool, EnvReply
from trl_env.envpool.replies import ContractBreach, Forked, Released
from trl_env.testing import InstantGenerator

ROOT = Path(__file__).resolve().parents[2]
MODES = ["thread", "process"]


def run(pool: EnvPool, seed: str, *actions: str) -> list:
    """reset(seed) then step(action) for each action; the list of replies/faults (stops at a fault)."""
    slot, future = pool.reset(seed)
    results = [future.result()]
    for action in actions:
        if isinstance(results[-1], EnvFault):
            break
        results.append(pool.step(slot, action).result())
    pool.release(slot).result()
    return results


@pytest.mark.parametrize("mode", MODES)
def test_a_call_past_its_deadline_is_a_timeout_and_the_worker_is_replaced(mode):
    with EnvPool(Hostile, isolation=mode, workers=1, timeout=0.5) as pool:
        run(pool, "ok")  # the worker is started: its start-up is not what we time
        start = time.perf_counter()
        results = run(pool, "ok", "ok", "hang", "ok")
        elapsed = time.perf_counter() - start
        assert results[-1] == EnvFault("timeout", "step took longer than 0.5 s")
        assert len(results) == 3 and 0.45 < elapsed < 2.0
        assert run(pool, "after", "ok")[-1] == EnvReply("ok done (turn 1)", 1.0, True)  # a fresh worker


@pytest.mark.parametrize("mode", MODES)
def test_hung_calls_time_out_in_parallel(mode):
    with EnvPool(Hostile, isolation=mode, workers=8, timeout=1.0) as pool:
        warm = [pool.reset("ok") for _ in range(8)]
        [future.result() for _, future in warm]
        [pool.release(slot).result() for slot, _ in warm]  # all 8 workers are up
        start = time.perf_counter()
        futures = [pool.reset("hang")[1] for _ in range(8)]
        assert all(future.result().kind == "timeout" for future in futures)
        assert time.perf_counter() - start < 2.5  # one deadline, not eight in a row


@pytest.mark.parametrize("mode", MODES)
def test_healthy_episodes_queued_behind_hung_ones_are_not_blamed(mode):
    seeds = ["sleep:8", "sleep:8", "sleep:0.3", "sleep:0.3", "sleep:0.3", "sleep:0.3"]
    with EnvPool(Hostile, isolation=mode, workers=2, timeout=1.0) as pool, ThreadPoolExecutor(6) as episodes:
        # each episode: reset, a 0.3 s step, release; the last ones wait ~1.5 s for a worker, uncharged
        results = list(episodes.map(lambda seed: run(pool, seed, "sleep:0.3"), seeds))
    assert [fault.kind for (fault,) in results[:2]] == ["timeout", "timeout"]
    assert all(type(result) is EnvReply for episode in results[2:] for result in episode)
    assert [len(episode) for episode in results[2:]] == [2] * 4


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["SystemExit", "KeyboardInterrupt", "GeneratorExit", "ValueError"])
def test_any_exception_raised_by_the_env_is_a_fault_of_its_slot(mode, name):
    with EnvPool(Hostile, isolation=mode, workers=2, timeout=5.0) as pool:
        slot, future = pool.reset("ok")
        other, other_future = pool.reset("ok")
        assert isinstance(future.result(), EnvReply) and isinstance(other_future.result(), EnvReply)
        fault = pool.step(slot, f"raise:{name}").result()
        assert fault.kind == "exception" and fault.message.startswith(name)
        assert pool.step(slot, "ok").result().delta == "ok done (turn 2)"  # the env is still there
        assert pool.step(other, "ok").result().delta == "ok done (turn 1)"


@pytest.mark.parametrize(("command", "message"), [("os_exit", "exit code 3"), ("segv", "exit code -11 (SIGSEGV)")])
def test_a_dying_process_worker_is_a_crash_and_the_pool_goes_on(command, message):
    with EnvPool(Hostile, isolation="process", workers=1, timeout=5.0) as pool:
        slot, future = pool.reset("ok")
        future.result()
        fault = pool.step(slot, command).result()
        assert fault == EnvFault("crash", f"worker died with {message} during step")
        assert pool.step(slot, "ok").result() is fault  # the env is gone; the slot answers at once
        assert pool.release(slot).result() is None
        assert run(pool, "again", "ok")[-1].delta == "ok done (turn 1)"


@pytest.mark.parametrize("mode", MODES)
def test_release_returns_metrics_and_closes_finished_and_failed_episodes(mode, tmp_path):
    path = tmp_path / "log"
    with EnvPool(functools.partial(Hostile, str(path)), isolation=mode, workers=1, timeout=5.0) as pool:
        slot, _ = pool.reset("ok")
        pool.step(slot, "ok")
        assert pool.release(slot).result() == {"turns": 1.0, "reward": 1.0}  # numpy int64 -> float
        slot, _ = pool.reset("ok")
        assert pool.step(slot, "raise:ValueError").result().kind == "exception"
        assert pool.release(slot).result() == {"turns": 1.0, "reward": 1.0}
        assert events(path) == ["factory", "reset", "metrics", "close"] * 2
        slot, _ = pool.reset("ok")
        assert pool.release(slot).result() is not None
    with EnvPool(Plain, isolation=mode, workers=1) as pool:
        slot, _ = pool.reset("a")
        assert pool.release(slot).result() is None  # no metrics()


@pytest.mark.parametrize("mode", MODES)
def test_release_after_a_timeout_is_none_at_once(mode, tmp_path):
    path = tmp_path / "log"
    with EnvPool(functools.partial(Hostile, str(path)), isolation=mode, workers=1, timeout=0.5) as pool:
        slot, _ = pool.reset("ok")
        assert pool.step(slot, "sleep:1.5").result().kind == "timeout"
        start = time.perf_counter()
        assert pool.release(slot).result() is None
        assert time.perf_counter() - start < 0.1
        time.sleep(1.5)
        # thread: the abandoned thread closes its env once the call returns; process: the env died with its worker
        assert events(path)[-1:] == (["close"] if mode == "thread" else ["reset"])


@pytest.mark.parametrize("mode", MODES)
def test_warm_reuse_builds_one_env_per_worker(mode, tmp_path):
    path = tmp_path / "log"
    factory = functools.partial(Hostile, str(path))
    with EnvPool(factory, isolation=mode, workers=2, timeout=5.0, reuse_envs=True) as pool:
        for wave in range(3):
            assert [r[-1].delta for r in [run(pool, f"s{wave}", "ok") for _ in range(2)]] == ["ok done (turn 1)"] * 2
        assert events(path).count("factory") <= 2 and events(path).count("reset") == 6
        assert "close" not in events(path)  # kept for the next episode
    assert events(path).count("close") == events(path).count("factory")  # closed at pool close


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["np", "np_int", "torch"])
def test_numpy_and_torch_scalars_are_accepted(mode, kind):
    with EnvPool(Hostile, isolation=mode, workers=1) as pool:
        reward = run(pool, "ok", f"reward:{kind}")[-1].reward
        assert type(reward) is float and reward == {"np": 0.5, "np_int": 2.0, "torch": 0.25}[kind]
        assert run(pool, "ok", "alive:np")[-1] == EnvReply("alive:np done (turn 1)", 1.0, False)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("reward:bool", r"Hostile.reward after step\(seed='s1'\) is True, expected a finite float"),
        ("reward:nan", r"Hostile.reward after step\(seed='s1'\) is nan, expected a finite float"),
        ("reward:torch_vector", r"Hostile.reward after step\(seed='s1'\) is tensor\(\[0.2500, 0.5000\]\)"),
        ("delta:int", r"Hostile.step\(seed='s1'\) returned a 2-tuple whose delta is int, expected str"),
    ],
)
def test_contract_violations_name_class_method_and_seed(mode, action, message):
    with EnvPool(Hostile, isolation=mode, workers=1) as pool:
        slot, _ = pool.reset("s1")
        with pytest.raises(EnvContractError, match=message):
            pool.step(slot, action).result()


@pytest.mark.parametrize("mode", MODES)
def test_factories_that_fail_or_build_no_env(mode):
    with EnvPool(not_an_env, isolation=mode, workers=1) as pool:
        with pytest.raises(EnvContractError, match=r"env_factory not_an_env returned object, which has no reset"):
            pool.reset("s")[1].result()
    with EnvPool(raising_factory, isolation=mode, workers=1) as pool:
        assert pool.reset("s")[1].result() == EnvFault("exception", "env_factory raised RuntimeError: no backend")


def test_the_env_returned_by_reset_is_the_one_stepped():
    with EnvPool(Handover, isolation="process", workers=1) as pool:
        assert run(pool, "a", "x")[-1].delta == "successor got x"


def test_unpicklable_factories_are_refused_at_construction():
    class Local(Plain):
        pass

    with pytest.raises(TypeError, match=r"<lambda>.*define it .* at module level"):
        EnvPool(lambda: Plain(), isolation="process")
    with pytest.raises(TypeError, match=r"Local.*define it .* at module level"):
        EnvPool(Local, isolation="process")
    EnvPool(Local, isolation="thread").close()  # threads take anything


def test_auto_isolation_is_chosen_by_the_pool_with_a_warning_that_names_the_callers_line():
    class Local(Plain):
        pass

    with EnvPool(Plain, isolation="auto") as pool:
        assert pool.isolation == "process" and pool.env_factory is Plain
    with pytest.warns(UserWarning, match="so its envs run in threads") as caught:
        pool = EnvPool(Local, isolation="auto")
    pool.close()
    assert pool.isolation == "thread" and caught[0].filename == __file__  # the user's line, not trl-env's
    with pytest.raises(TypeError, match="env_factory must be a class or function that makes a new env, got 3"):
        EnvPool(3, isolation="auto")  # type: ignore[arg-type]


def test_the_engine_pickles_its_factory_once_and_keeps_its_pool_for_the_same_factory(qwen3_tokenizer):
    PICKLED.clear()
    factory = functools.partial(plain_with, CountsPickles())
    stop = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    generator = InstantGenerator(range(100, 3000), stop_id=stop, stop_prob=1.0)
    config = RolloutConfig(max_turns=1, max_turn_tokens=2, env_workers=1)  # env_isolation="auto"
    engine = RolloutEngine(generator, ChatTemplateProcessor(qwen3_tokenizer), qwen3_tokenizer, config)
    try:
        assert not engine.run(factory, ["a"])[0].failed
        pool = engine._pool
        assert not engine.run(factory, ["b"])[0].failed
        assert engine._pool is pool and pool.isolation == "process"
        assert PICKLED == ["pickled"]  # the isolation choice and the worker processes share one pickle
    finally:
        engine.close()


def test_a_forgotten_pool_is_closed_when_garbage_collected():
    pool = EnvPool(Hostile, isolation="process", workers=1, timeout=None)
    slot, _ = pool.reset("hang")
    while pool._state.workers[0].backend is None:
        time.sleep(0.01)
    backend = pool._state.workers[0].backend
    del pool, slot
    gc.collect()
    assert backend.exit_code(5.0) == -signal.SIGKILL


def test_a_killed_worker_reports_sigkill_to_every_thread_that_asks():
    # Process.join from two threads at once reads the forkserver's exit-code pipe twice: one gets EOF and
    # reports 255 (in 1 to 3 rounds of 4 before exit_code() serialised the polls; a clean CI run failed on it).
    for _ in range(12):
        backend = ProcessBackend(pickle.dumps(Hostile), reuse=False)
        with ThreadPoolExecutor(5) as threads:
            lost = threads.submit(backend.call, "reset", "hang", None)
            codes = [threads.submit(backend.exit_code, 10.0) for _ in range(4)]
            time.sleep(0.05)
            backend.kill(reap=False)
            assert [code.result() for code in codes] == [-signal.SIGKILL] * 4
            with pytest.raises(WorkerLost, match=r"exit code -9 \(SIGKILL\) during reset"):
                lost.result()
        backend.reap()


def test_a_process_worker_answers_with_the_outcome_dataclasses_themselves():
    backend = ProcessBackend(pickle.dumps(Hostile), reuse=False)
    try:
        assert backend.call("reset", "ok", 10.0) == EnvReply("ok done (turn 0)", 0.0, True)
        forked = backend.call("fork", "", 10.0)
        assert isinstance(forked, Forked) and isinstance(forked.copy, bytes)  # the parent never unpickles the env
        assert backend.call("release", "", 10.0) == Released({"turns": 0.0, "reward": 0.0}, None)
        assert backend.call("step", "x", 10.0) == ContractBreach(
            "step('x') with no env: reset() did not build one or the slot was released"
        )
    finally:
        backend.kill()


def test_the_pool_bookkeeping_touches_no_other_objects_private_fields():
    # each slot's bookkeeping is a SlotRecord that PoolState and its workers own; the EnvSlot handle only reads it
    for module in ("state", "worker"):
        source = (ROOT / "src" / "trl_env" / "envpool" / f"{module}.py").read_text()
        assert re.findall(r"\b(?!self\b)\w+\._[a-z]\w*", source) == [], module


def test_slots_of_other_pools_or_released_ones_are_refused():
    with EnvPool(Plain, isolation="thread") as pool, EnvPool(Plain, isolation="thread") as other:
        slot, _ = pool.reset("a")
        with pytest.raises(ValueError, match="not a slot of this EnvPool"):
            other.step(slot, "x")
        pool.release(slot)
        with pytest.raises(ValueError, match="was released"):
            pool.step(slot, "x")


@pytest.mark.parametrize("module", ["host", "replies", "backends", "pool", "isolation", "values", "forking"])
def test_docstring_examples(module):
    assert (
        doctest.testmod(importlib.import_module(f"trl_env.envpool.{module}"), optionflags=doctest.ELLIPSIS).failed == 0
    )


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_wait_idle_waits_for_every_call_that_can_answer_and_no_queued_one(isolation):
    with EnvPool(Hostile, isolation=isolation, workers=2, timeout=None) as pool:
        first, started = pool.reset("ok")
        second, slow = pool.reset("sleep:0.3")
        third, queued = pool.reset("ok")
        step = pool.step(first, "sleep:0.2")
        pool.wait_idle()
        assert started.done() and slow.done() and step.done()
        assert not queued.done() and third.queued and not first.queued
        pool.release(second)  # its worker goes to the queued slot: wait_idle covers the release and that reset
        pool.wait_idle()
        assert isinstance(queued.result(timeout=0), EnvReply) and not third.queued


def test_wait_idle_returns_when_the_pool_closes():
    pool = EnvPool(Hostile, isolation="thread", workers=1, timeout=None)
    pool.reset("hang")
    with ThreadPoolExecutor(1) as executor:
        waiting = executor.submit(pool.wait_idle)
        time.sleep(0.1)
        assert not waiting.done()
        pool.close()
        waiting.result(timeout=2)


def test_close_cancels_pending_calls_and_is_idempotent():
    pool = EnvPool(Hostile, isolation="thread", workers=1, timeout=None)
    slot, hung = pool.reset("sleep:5")
    _, queued = pool.reset("ok")
    start = time.perf_counter()
    pool.close()
    pool.close()
    assert hung.cancelled() and queued.cancelled() and time.perf_counter() - start < 0.5
    assert pool.release(slot).result() is None
    with pytest.raises(RuntimeError, match="closed"):
        pool.reset("again")


def test_close_wakes_a_thread_waiting_on_pending_calls():
    """The engine waits with concurrent.futures.wait; a cancel that only set the state would leave it there forever
    (an interrupted pipelined run then hung at exit)."""
    pool = EnvPool(Hostile, isolation="thread", workers=1, timeout=None)
    _, hung = pool.reset("hang")
    _, queued = pool.reset("ok")
    finished: dict = {}
    waiter = threading.Thread(target=lambda: finished.update(done=wait([hung, queued])[0]), daemon=True)
    waiter.start()
    time.sleep(0.1)
    assert waiter.is_alive()
    pool.close()
    waiter.join(timeout=2)
    assert not waiter.is_alive(), "close() left a concurrent.futures.wait() waiting"
    assert finished["done"] == {hung, queued} and hung.cancelled()


def _python(script: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, **popen}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], env=env, cwd=ROOT, text=True, **popen,
    )  # fmt: skip


HANG_THEN_RETURN = """
    import sys, time
    from tests.engine.hostile_envs import Hostile
    from trl_env.envpool.pool import EnvPool
    pools = [EnvPool(Hostile, isolation=mode, workers=2, timeout=None) for mode in ("thread", "process")]
    futures = [pool.reset(seed)[1] for pool in pools for seed in ("hang", "wait_forever")]
    while any(worker.backend is None for worker in pools[1]._state.workers):
        time.sleep(0.05)  # the process workers are starting
    time.sleep(0.2)
    print(*[w.backend.process.pid for w in pools[1]._state.workers], flush=True)
    print(time.time(), flush=True)
"""


CTRL_C_HANDLER = """
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)"""


def test_a_process_whose_calls_hang_forever_exits_promptly():
    child = _python(HANG_THEN_RETURN)
    pids = [int(pid) for pid in child.stdout.readline().split()]
    returned = float(child.stdout.readline())
    assert child.wait(timeout=60) == 0, child.stderr.read()
    # ~1.2 s measured, nearly all of it the teardown of an interpreter that imported trl-env (torch,
    # transformers): importing alone exits in ~1 s. The margin is for a loaded machine; a hang would never exit.
    assert time.time() - returned < 3.0
    for pid in pids:  # no orphan worker left: gone, or a zombie about to be reaped
        status = Path(f"/proc/{pid}/status")
        assert not status.exists() or "State:\tZ" in status.read_text()
    # the forkserver (which holds our stdout too) exits by itself once it sees its parent gone
    child.communicate(timeout=15)


def test_ctrl_c_stops_the_parent_and_the_workers_stay_quiet(tmp_path):
    # A job started in the background by a shell (`nohup ... &`, as CI may be) inherits SIGINT ignored, and Python
    # then leaves it ignored: the parent would never see the Ctrl-C. A terminal's foreground process has Python's
    # own handler, so the script installs it first.
    script = CTRL_C_HANDLER + HANG_THEN_RETURN.replace("print(time.time(), flush=True)", "futures[-1].result()")
    # stderr goes to a file, read once the parent has exited: the forkserver inherits the parent's pipes and
    # may hold them open a little longer, and what is tested is the parent's exit, not the server's
    with (tmp_path / "stderr").open("w") as stderr_file:
        child = _python(script, start_new_session=True, stderr=stderr_file)
        child.stdout.readline()  # the workers are up and hanging
        os.killpg(child.pid, signal.SIGINT)  # like Ctrl-C in a terminal: the whole process group
        child.wait(timeout=60)
        child.stdout.close()
    stderr = (tmp_path / "stderr").read_text()
    # an unhandled KeyboardInterrupt ends Python with SIGINT's status (-2) or 1, depending on the handlers
    assert child.returncode in (1, -signal.SIGINT) and stderr.count("KeyboardInterrupt") == 1, stderr
