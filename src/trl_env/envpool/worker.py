"""One worker of the env pool: a queue of its slot's calls, a daemon driver thread and (started lazily) a backend.

The driver runs the calls one at a time on the backend (thread or process), so a call's deadline starts
when the worker starts it. A lost backend (timeout, crash) is killed or abandoned, the call's slot gets
the fault, and a fresh backend starts for the worker's next call. The bookkeeping of slots and workers
is :class:`trl_env.envpool.state.PoolState`.
"""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trl_env.envpool.backends import WorkerLost
from trl_env.envpool.replies import ContractBreach, EnvContractError, EnvFault, Forked, Outcome, Released

if TYPE_CHECKING:
    from trl_env.envpool.state import PoolState, SlotRecord

logger = logging.getLogger("trl_env.envpool.pool")


@dataclass
class Task:
    """One call on a slot: ``op`` is "reset", "step", "fork", "adopt" or "release"."""

    op: str
    arg: Any
    slot: SlotRecord
    future: Future


class PoolWorker:
    """One worker: a task queue, a daemon driver thread and (started lazily) its backend."""

    def __init__(self, pool: PoolState, index: int) -> None:
        self.pool = pool
        self.tasks: queue.SimpleQueue[Task | None] = queue.SimpleQueue()
        self.backend: Any = None
        self.slot: SlotRecord | None = None  # the slot whose episode runs on this worker
        self.busy = False
        threading.Thread(target=self._drive, daemon=True, name=f"trl-env-pool-{index}").start()

    def _drive(self) -> None:
        while (task := self.tasks.get()) is not None:
            try:
                self._run(task)
            finally:  # after the reply and any unbind(): the next queued slot's tasks are counted already
                self.pool.task_done()

    def _run(self, task: Task) -> None:
        pool = self.pool
        if task.slot.fault is not None:  # a call queued behind the one that lost the env
            pool.resolve(task.future, None if task.op == "release" else task.slot.fault)
            return
        with pool.lock:
            if pool.closed:
                return
            self.busy = True
        try:
            outcome = self._call(task)
        except WorkerLost as lost:
            if not pool.closed:
                self._lose(task, EnvFault(lost.kind, lost.message))
            return
        except BaseException as error:  # the pool's own failure (e.g. no process could start): tell the caller
            pool.resolve(task.future, error=error)
            if task.op == "release":
                pool.unbind(self)
            return
        finally:
            with pool.lock:
                self.busy = False
        self._deliver(task, outcome)

    def _call(self, task: Task) -> Outcome:
        """Start the backend if needed (not charged to the deadline), then run the call on it."""
        if self.backend is None:
            backend = self.pool.new_backend()
            with self.pool.lock:
                if self.pool.closed:
                    backend.kill()
                    raise WorkerLost("crash", "pool closed")
                self.backend = backend
        return self.backend.call(task.op, task.arg, self.pool.timeout)

    def _lose(self, task: Task, fault: Any) -> None:
        """Timeout or crash: kill/abandon the backend (a fresh one starts for the next call), free the worker."""
        backend, self.backend = self.backend, None
        if backend is not None:
            backend.kill()
        with self.pool.lock:
            task.slot.fault = fault  # before unbind(): a later step() on the slot answers with it at once
        self.pool.resolve(task.future, None if task.op == "release" else fault)
        self.pool.unbind(self)

    def _deliver(self, task: Task, outcome: Outcome) -> None:
        """Settle the task's future with the worker's outcome: a reply or fault as it is, a breach as an error."""
        pool = self.pool
        match outcome:
            case ContractBreach(message):
                pool.resolve(task.future, error=EnvContractError(message))
            case Released(metrics, warning):
                if warning is not None:
                    logger.warning("%s", warning)
                pool.resolve(task.future, metrics)
            case Forked(copy):  # the copy, for the new slot's "adopt" (see PoolState.fork)
                pool.resolve(task.future, copy)
            case _:  # EnvReply or EnvFault: the pool's user gets it as it is
                pool.resolve(task.future, outcome)
        if task.op == "release":
            pool.unbind(self)
