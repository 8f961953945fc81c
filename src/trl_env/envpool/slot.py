"""``EnvSlot``: the handle on one episode's env that :meth:`~trl_env.envpool.pool.EnvPool.reset` returns.

A slot is what a caller passes back to ``step``, ``fork`` and ``release``; the bookkeeping behind it (its state,
its worker) is a :class:`~trl_env.envpool.state.SlotRecord`, owned by the pool's
:class:`~trl_env.envpool.state.PoolState`. ``trl_env.envpool.pool.EnvSlot`` and ``trl_env.envpool.EnvSlot`` are
this class too.
"""

from __future__ import annotations

from trl_env.envpool.state import PoolState, SlotRecord


class EnvSlot:
    """A handle on one episode's env in a pool (returned by :meth:`~trl_env.envpool.pool.EnvPool.reset`).

    Attributes:
        seed: the seed the episode was reset with.
        index: the slot's number in its pool, counting from 0.
        forked_from: the index of the slot this one was forked from
            (:meth:`~trl_env.envpool.pool.EnvPool.fork`), or None.
    """

    def __init__(self, pool: PoolState, record: SlotRecord, forked_from: int | None = None) -> None:
        self.seed, self.index, self.forked_from = record.seed, record.index, forked_from
        self._pool, self._record = pool, record  # the pool's bookkeeping, owned by PoolState and its workers

    @property
    def queued(self) -> bool:
        """Whether the slot waits for a worker: its calls run once an episode on a busy worker is released."""
        return self._record.state == "queued"

    @property
    def node(self) -> str | None:
        """``isolation="ray"``: the Ray node id of the actor running the slot's env; None while queued, once
        released or lost, and for the other isolations."""
        worker = self._record.worker
        return getattr(worker.backend, "node_id", None) if worker is not None else None

    def __repr__(self) -> str:
        return f"EnvSlot(index={self.index}, seed={self.seed!r}, {self._record.state})"
