"""The env pool's bookkeeping: slots bound to workers, and a queue of slots waiting for a free one.

Each worker (:class:`trl_env.envpool.worker.PoolWorker`) runs its slot's calls in order on its own
backend. A lost worker (timeout, crash) gets a fresh backend for its next call, and the lost slot is
unbound at once so that a queued slot can take the worker. :meth:`PoolState.wait_idle` waits until no worker
has a call running or queued, the point where only the pool's user can make anything move again.

The public face is :class:`trl_env.envpool.pool.EnvPool`, whose :class:`~trl_env.envpool.pool.EnvSlot` handles
read the :class:`SlotRecord` that this module keeps for each slot; this module holds no env code.
"""

from __future__ import annotations

import atexit
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from trl_env.envpool.replies import EnvFault
from trl_env.envpool.worker import PoolWorker, Task
from trl_env.errors import BackendError

CLOSE_GRACE_S = 1.0  # how long close() lets idle workers run their envs' close()
_LIVE: weakref.WeakSet[PoolState] = weakref.WeakSet()
_atexit_registered = False


class SlotRecord:
    """The pool's bookkeeping of one slot: :class:`PoolState` and its workers own it, the slot's handle reads it.

    Attributes:
        seed: the seed the episode was reset with.
        index: the slot's number in its pool.
        worker: the worker it is bound to; None while queued or after its env was lost.
        backlog: calls made before a worker was free (run in order once it is bound).
        fault: set when the env was lost (timeout, crash): every later call answers with it at once.
        released: ``release`` was called.
    """

    def __init__(self, seed: str, index: int) -> None:
        self.seed, self.index = seed, index
        self.worker: PoolWorker | None = None
        self.backlog: list[Task] = []
        self.fault: EnvFault | None = None
        self.released = False

    @property
    def state(self) -> str:
        """``"released"``, ``"lost"``, ``"bound"`` (to a worker) or ``"queued"`` (waiting for one)."""
        return "released" if self.released else "lost" if self.fault else "bound" if self.worker else "queued"


class PoolState:
    """Slots, workers and futures of one pool, without a reference back to the pool object.

    Args:
        new_backend: starts a worker backend (``ThreadBackend``/``ProcessBackend``).
        workers: the pool size.
        timeout: each call's deadline in seconds, or None.
    """

    def __init__(self, new_backend: Callable[[], Any], *, workers: int, timeout: float | None) -> None:
        self.new_backend, self.timeout = new_backend, timeout
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)  # notified when the last task on a worker queue is done
        self.queued_tasks = 0  # tasks put on worker queues and not done yet (see wait_idle)
        self.closed = False
        self.outstanding: set[Future] = set()
        self.pending: deque[SlotRecord] = deque()
        self.slots_made = 0
        self.workers = [PoolWorker(self, index) for index in range(workers)]
        self.free: deque[PoolWorker] = deque(self.workers)
        _register(self)

    def reset(self, seed: str) -> tuple[SlotRecord, Future]:
        """A new slot whose first call is ``reset(seed)``, bound to a free worker or queued."""
        with self.lock:
            if self.closed:
                raise BackendError("EnvPool is closed")
            slot = self._new_slot(seed)
            future = self._future()
            slot.backlog.append(Task("reset", seed, slot, future))
            if self.free:
                self._bind(self.free.popleft(), slot)
            else:
                self.pending.append(slot)
        return slot, future

    def fork(self, source: SlotRecord) -> tuple[SlotRecord, Future]:
        """A new slot continuing a copy of ``source``'s env as it is after the source's earlier calls.

        The source's worker copies its env (a "fork" task, queued like a step); once the copy is there,
        the new slot's first task, "adopt", loads it on a free worker (or the slot queues for one), so no
        worker sits idle waiting for a copy. A lost source makes a lost copy.
        """
        with self.lock:
            if self.closed:
                raise BackendError("EnvPool is closed")
            slot = self._new_slot(source.seed)
            if source.fault is not None:  # the source's env is gone: so is its copy
                slot.fault = source.fault
                return slot, _done(source.fault)
            adopted, copied = self._future(), self._future()
            slot.backlog.append(Task("adopt", None, slot, adopted))
            task = Task("fork", "", source, copied)
            if source.worker is not None:
                self._put(source.worker, task)
            else:
                source.backlog.append(task)
        copied.add_done_callback(lambda future: self._adopt(slot, future))  # at once if already copied
        return slot, adopted

    def _adopt(self, slot: SlotRecord, copied: Future) -> None:
        """The source's copy arrived (or failed): queue the new slot for a worker, or fail it like the source."""
        error, fault = None, None
        if copied.cancelled():  # the source was released while still queued, before it ran (or the pool closed)
            fault = EnvFault("exception", "the slot it was forked from was released before its env could be copied")
        elif copied.exception() is not None:
            error = copied.exception()
        elif isinstance(copied.result(), EnvFault):
            fault = copied.result()
        with self.lock:
            if self.closed or slot.released:  # close() cancelled its futures; release() dropped its backlog
                return
            if error is None and fault is None:
                slot.backlog[0].arg = (slot.seed, copied.result())
                if self.free:
                    self._bind(self.free.popleft(), slot)
                else:
                    self.pending.append(slot)
                return
            slot.fault = fault or EnvFault("exception", str(error))
            backlog, slot.backlog = slot.backlog, []
        for task in backlog:  # the adopt (it gets the source's error or fault), then steps queued on the copy
            if task.op == "adopt" and error is not None:
                self.resolve(task.future, error=error)
            else:
                self.resolve(task.future, slot.fault)

    def submit(self, slot: SlotRecord, op: str, arg: str) -> Future:
        """Queue ``step``/``release`` on the slot's worker (or its backlog while it waits for one)."""
        with self.lock:
            if op == "release":
                slot.released = True
            if self.closed:
                if op == "step":
                    raise BackendError("EnvPool is closed")
                return _done(None)
            if slot.fault is not None:  # the env was lost: nothing can run on it
                return _done(slot.fault if op == "step" else None)
            dropped: list[Task] = []
            if op == "release" and slot.worker is None:  # still queued for a worker (or for its fork's copy): drop it
                if slot in self.pending:
                    self.pending.remove(slot)
                dropped, slot.backlog = slot.backlog, []
                for task in dropped:
                    self.outstanding.discard(task.future)
            else:
                task = Task(op, arg, slot, self._future())
                if slot.worker is not None:
                    self._put(slot.worker, task)
                else:
                    slot.backlog.append(task)
                return task.future
        for task in dropped:  # outside the lock: cancelling runs callbacks (a fork's copy -> _adopt) that take it
            _cancel(task.future)
        return _done(None)

    def _new_slot(self, seed: str) -> SlotRecord:
        slot = SlotRecord(seed, self.slots_made)
        self.slots_made += 1
        return slot

    def _future(self) -> Future:
        future: Future = Future()
        self.outstanding.add(future)
        return future

    def _bind(self, worker: PoolWorker, slot: SlotRecord) -> None:
        worker.slot, slot.worker = slot, worker
        for task in slot.backlog:
            self._put(worker, task)
        slot.backlog = []

    def _put(self, worker: PoolWorker, task: Task) -> None:
        """Queue ``task`` on ``worker`` (under the lock), counted until the worker is done with it."""
        self.queued_tasks += 1
        worker.tasks.put(task)

    def task_done(self) -> None:
        """A worker finished a task: its reply is delivered and, for a release, the next queued slot bound."""
        with self.lock:
            self.queued_tasks -= 1
            if self.queued_tasks == 0:
                self.idle.notify_all()

    def wait_idle(self) -> None:
        """Block until no worker has a task running or queued (or the pool closed).

        Then every call that could run has answered, every release has handed its worker to the next queued
        slot and that slot's first call has answered too; a call still unanswered waits for a worker that a
        slot with nothing to do holds, and only a new ``step`` or ``release`` from the pool's user moves it.
        """
        with self.lock:
            while self.queued_tasks and not self.closed:
                self.idle.wait()

    def unbind(self, worker: PoolWorker) -> None:
        """The worker's episode is over (released, or env lost): give it to the next queued slot."""
        with self.lock:
            if worker.slot is not None:
                worker.slot.worker = None
            worker.slot = None
            if self.closed:
                return
            if self.pending:
                self._bind(worker, self.pending.popleft())
            else:
                self.free.append(worker)

    def resolve(self, future: Future, result: Any = None, error: BaseException | None = None) -> None:
        """Settle a future unless close() cancelled it already."""
        with self.lock:
            self.outstanding.discard(future)
        try:
            future.set_exception(error) if error is not None else future.set_result(result)
        except InvalidStateError:  # cancelled by close()
            pass

    def close(self) -> None:
        """Cancel what is pending, let idle workers close their envs (bounded), kill the rest. Idempotent."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            self.idle.notify_all()  # wait_idle() returns
            futures, self.outstanding = self.outstanding, set()
            backends = [worker.backend for worker in self.workers if worker.backend is not None]
            idle = [worker.backend for worker in self.workers if not worker.busy and worker.backend is not None]
            for worker in self.workers:
                worker.backend = None
                worker.tasks.put(None)  # its driver stops
        _LIVE.discard(self)
        for future in futures:
            _cancel(future)
        for backend in backends:  # busy ones die now, idle ones get CLOSE_GRACE_S to close() their env
            backend.begin_shutdown() if backend in idle else backend.kill(reap=False)
        deadline = time.monotonic() + CLOSE_GRACE_S
        for backend in idle:
            backend.finish_shutdown(deadline)
        for backend in backends:
            backend.kill(reap=False)
        for backend in backends:
            backend.reap()


def _cancel(future: Future) -> None:
    """Cancel ``future`` and wake whoever waits for it in ``concurrent.futures.wait``/``as_completed``:
    ``Future.cancel()`` alone wakes only ``result()`` callers; those waiters learn of it from
    ``set_running_or_notify_cancel()``, which an executor would call (without it they wait forever)."""
    if future.cancel():
        future.set_running_or_notify_cancel()


def _done(result: Any) -> Future:
    future: Future = Future()
    future.set_result(result)
    return future


def _register(state: PoolState) -> None:
    """Close every live pool at interpreter exit, before multiprocessing joins its children."""
    global _atexit_registered
    _LIVE.add(state)
    if not _atexit_registered:
        atexit.register(_close_all)  # registered after multiprocessing.util's hook, so it runs first
        _atexit_registered = True


def _close_all() -> None:
    for state in list(_LIVE):
        state.close()
