"""EnvPool.fork: copies of a mid-episode env on other workers, in both isolations (real threads and processes)."""

from __future__ import annotations

import copy
import doctest
import functools
import pickle
import time

import pytest

from tests.engine.fork_envs import ForkablePiped, Piped, Scripted, Socketed, Tally
from tests.engine.hostile_envs import events
from trl_env.envpool import forking
from trl_env.envpool.forking import ForkError, fork_bytes, fork_env
from trl_env.envpool.pool import EnvContractError, EnvFault, EnvPool, EnvReply

MODES = ["thread", "process"]


def history(reply: EnvReply) -> str:
    """``"seed/a/b"`` from a :class:`Tally` delta ``"seed/a/b in PID"``."""
    return reply.delta.split(" in ")[0]


def pid(reply: EnvReply) -> int:
    return int(reply.delta.split(" in ")[1].split()[0])


@pytest.mark.parametrize("mode", MODES)
def test_forked_branches_evolve_independently(mode):
    with EnvPool(Tally, isolation=mode, workers=3, timeout=10.0) as pool:
        slot, _ = pool.reset("s")
        source_step = pool.step(slot, "a").result()
        branch, forked = pool.fork(slot)
        assert forked.result() == EnvReply("", 1.0, True)  # the reward and alive of the source after "a"
        assert branch.seed == "s" and branch.forked_from == slot.index and branch.index != slot.index
        ended = pool.step(branch, "end").result()
        assert history(ended) == "s/a/end" and (ended.reward, ended.alive) == (2.0, False)
        go_on = pool.step(slot, "b").result()  # the source never saw "end"
        assert history(go_on) == "s/a/b" and (go_on.reward, go_on.alive) == (2.0, True)
        if mode == "process":  # the copy was pickled into another child process
            assert pid(ended) != pid(go_on) == pid(source_step)
        twig, _ = pool.fork(branch)  # a fork of a fork, of an ended episode: alive=False is copied too
        assert pool.step(twig, "x").result().reward == 3.0
        assert pool.release(branch).result() == {"steps": 2.0}
        assert pool.release(twig).result() == {"steps": 3.0}
        assert pool.release(slot).result() == {"steps": 2.0}


@pytest.mark.parametrize("mode", MODES)
def test_a_finished_episode_forks_with_its_reward_and_alive(mode):
    with EnvPool(Tally, isolation=mode, workers=2, timeout=10.0) as pool:
        slot, _ = pool.reset("s")
        pool.step(slot, "a")
        pool.step(slot, "end")
        assert pool.fork(slot)[1].result() == EnvReply("", 2.0, False)


@pytest.mark.parametrize("mode", MODES)
def test_fork_is_ordered_after_the_calls_queued_before_it(mode):
    with EnvPool(Tally, isolation=mode, workers=2, timeout=10.0) as pool:
        slot, _ = pool.reset("s")
        first = pool.step(slot, "sleep:0.3")
        second = pool.step(slot, "b")
        branch, forked = pool.fork(slot)  # the source's worker is still busy with the sleep
        after = pool.step(slot, "after")
        assert not first.done() and forked.result() == EnvReply("", 2.0, True)
        assert history(pool.step(branch, "c").result()) == "s/sleep:0.3/b/c"  # both earlier steps, not "after"
        assert history(after.result()) == "s/sleep:0.3/b/after" and history(second.result()) == "s/sleep:0.3/b"


@pytest.mark.parametrize("mode", MODES)
def test_fork_of_a_slot_still_queued_for_a_worker_waits_for_it(mode):
    with EnvPool(Tally, isolation=mode, workers=1, timeout=10.0) as pool:
        holder, _ = pool.reset("holder")
        slot, reset = pool.reset("s")  # queued: the only worker is held
        pool.step(slot, "a")
        branch, forked = pool.fork(slot)
        step = pool.step(branch, "b")  # queued behind the copy
        time.sleep(0.2)
        assert not reset.done() and not forked.done()
        pool.release(holder)
        assert history(reset.result()) == "s"
        time.sleep(0.2)
        assert not forked.done()  # copied, but its worker is still held by the source
        pool.release(slot)
        assert forked.result() == EnvReply("", 1.0, True) and history(step.result()) == "s/a/b"


@pytest.mark.parametrize("mode", MODES)
def test_fork_of_a_released_slot_is_refused_and_of_a_lost_slot_is_its_fault(mode):
    with EnvPool(Tally, isolation=mode, workers=2, timeout=0.5) as pool:
        slot, _ = pool.reset("s")
        pool.release(slot)
        with pytest.raises(ValueError, match="was released"):
            pool.fork(slot)
        slot, _ = pool.reset("s")
        fault = pool.step(slot, "sleep:2").result()
        assert fault == EnvFault("timeout", "step took longer than 0.5 s")
        start = time.perf_counter()
        branch, forked = pool.fork(slot)
        assert forked.result() is fault and time.perf_counter() - start < 0.1
        assert pool.step(branch, "a").result() is fault and pool.release(branch).result() is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("env", [Piped, Socketed])
def test_an_env_that_cannot_be_copied_is_a_clear_error_and_the_source_goes_on(mode, env):
    cause = "copy.deepcopy failed" if mode == "thread" else "to another process: pickling it failed"
    with EnvPool(env, isolation=mode, workers=2, timeout=10.0) as pool:
        slot, _ = pool.reset("s")
        branch, forked = pool.fork(slot)
        with pytest.raises(EnvContractError, match=f"cannot fork {env.__name__}"):
            forked.result()
        with pytest.raises(EnvContractError) as caught:
            pool.fork(slot)[1].result()
        message = str(caught.value)
        assert cause in message and "cannot pickle" in message and "fork()" in message and "seed='s'" in message
        assert pool.step(branch, "a").result().kind == "exception"  # the copy never existed
        assert pool.step(slot, "a").result().reward == 1.0  # the source is untouched
        pool.release(branch)
        pool.release(slot).result()


@pytest.mark.parametrize("mode", MODES)
def test_an_env_with_its_own_fork_gets_a_copy_sharing_nothing(mode):
    with EnvPool(ForkablePiped, isolation=mode, workers=2, timeout=10.0) as pool:
        slot, _ = pool.reset("s")
        pool.step(slot, "a")
        branch, forked = pool.fork(slot)
        assert forked.result() == EnvReply("", 1.0, True)
        copied, source = pool.step(branch, "b").result().delta, pool.step(slot, "c").result().delta
        assert copied.startswith("b via") and copied.endswith("after s/a/b")
        assert source.startswith("c via") and source.endswith("after s/a/c")
        assert copied.split()[2] != source.split()[2]  # two cat processes
        pool.release(branch).result()
        pool.release(slot).result()


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_or_hanging_fork_method_is_a_fault(mode):
    with EnvPool(Scripted, isolation=mode, workers=2, timeout=0.5) as pool:
        slot, _ = pool.reset("s")
        pool.step(slot, "fork_raises")
        assert pool.fork(slot)[1].result() == EnvFault("exception", "fork() raised RuntimeError: no copies today")
        assert pool.step(slot, "fine").result().reward == 2.0  # a fault of the fork call only
        branch, forked = pool.fork(slot)
        assert pool.step(branch, "x").result().delta.endswith("forks 1")
        pool.step(slot, "fork_returns_self")
        with pytest.raises(EnvContractError, match=r"Scripted.fork\(\) returned the env itself"):
            pool.fork(slot)[1].result()
        pool.step(slot, "fork_hangs")
        timeout = EnvFault("timeout", "fork took longer than 0.5 s")
        assert pool.fork(slot)[1].result() == timeout
        assert pool.step(slot, "y").result() == timeout  # copying is charged to the source: its worker was lost


@pytest.mark.parametrize("mode", MODES)
def test_releasing_a_copy_before_it_exists_drops_it(mode):
    with EnvPool(Tally, isolation=mode, workers=2, timeout=10.0) as pool:
        slot, _ = pool.reset("s")
        pool.step(slot, "sleep:0.3")
        branch, forked = pool.fork(slot)
        assert pool.release(branch).result() is None and forked.cancelled()
        time.sleep(0.5)  # the copy arrives for a slot already gone: it takes no worker
        other, reset = pool.reset("t")
        assert history(reset.result(timeout=60)) == "t"  # the second worker was not taken by the dropped copy
        assert pool.step(slot, "a").result().reward == 2.0


@pytest.mark.parametrize("mode", MODES)
def test_with_reuse_envs_the_copy_replaces_the_kept_env(mode, tmp_path):
    path = tmp_path / "log"
    with EnvPool(functools.partial(Tally, str(path)), isolation=mode, workers=2, reuse_envs=True) as pool:
        warm = [pool.reset(seed) for seed in ("a", "b")]
        [future.result() for _, future in warm]
        [pool.release(slot).result() for slot, _ in warm]  # each worker keeps one env
        slot, _ = pool.reset("s")
        branch, forked = pool.fork(slot)
        assert forked.result() == EnvReply("", 0.0, True)
        logged = events(path)  # the two warm-up episodes' workers run at once: their events may interleave
        assert sorted(logged[:4]) == ["factory", "factory", "reset", "reset"]
        assert logged[4:] == ["reset", "close"]  # then "s" is reset, and the copy replaces the other worker's env
        [pool.release(s).result() for s in (slot, branch)]
        again = [pool.reset(seed)[1].result() for seed in ("x", "y")]  # warm resets of the source and the copy
        assert sorted(history(reply) for reply in again) == ["x", "y"] and events(path).count("factory") == 2
    assert events(path).count("close") == 3  # the replaced env, then the two kept ones at pool close


def test_releasing_a_queued_source_before_it_ran_fails_its_copy():
    with EnvPool(Tally, isolation="thread", workers=1, timeout=10.0) as pool:
        holder, _ = pool.reset("holder")
        slot, reset = pool.reset("s")  # queued behind the holder
        branch, forked = pool.fork(slot)
        pool.release(slot)
        fault = EnvFault("exception", "the slot it was forked from was released before its env could be copied")
        assert reset.cancelled() and forked.result(timeout=1) == fault
        assert pool.step(branch, "a").result() == fault and pool.release(branch).result() is None
        pool.release(holder)
        assert history(pool.reset("t")[1].result(timeout=10)) == "t"  # the worker went to no dead slot


def test_close_cancels_a_fork_in_progress():
    pool = EnvPool(Tally, isolation="thread", workers=2, timeout=None)
    slot, _ = pool.reset("s")
    pool.step(slot, "sleep:0.5")
    branch, forked = pool.fork(slot)
    pool.close()
    assert forked.cancelled() and pool.release(branch).result() is None
    with pytest.raises(RuntimeError, match="closed"):
        pool.fork(slot)


def test_fork_env_and_fork_bytes_directly():
    env, _ = Tally().reset("s")
    env.step("a")
    for copied in (fork_env(env), pickle.loads(fork_bytes(env))):
        copied.step("b")
        assert copied.history == ["s", "a", "b"] and env.history == ["s", "a"]
    piped, _ = Piped().reset("s")
    try:
        with pytest.raises(ForkError, match=r"cannot fork Piped: copy.deepcopy failed \(TypeError: cannot pickle"):
            fork_env(piped)
        with pytest.raises(ForkError, match=r"cannot fork Piped to another process: pickling it failed"):
            fork_bytes(piped)
        with pytest.raises(TypeError):  # what fork_env relies on: deepcopy refuses a live process
            copy.deepcopy(piped)
        forkable = ForkablePiped()
        forkable.reset("s")
        assert fork_env(forkable).process is None and pickle.loads(fork_bytes(forkable)).history == ["s"]
        forkable.close()
    finally:
        piped.close()


def test_docstring_examples_run():
    result = doctest.testmod(forking, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8 and result.failed == 0
