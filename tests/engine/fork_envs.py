"""Envs for the fork tests: importable, so process workers can unpickle them.

:class:`Tally` keeps a list of its actions (mutable state a shallow copy would share) and says
which process it lives in. :class:`Piped` holds a live child process (``cat``), which neither
``copy.deepcopy`` nor ``pickle`` accepts; :class:`ForkablePiped` adds a ``fork()`` that starts its
own process. :class:`Socketed` holds an open socket.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time

from tests.engine.hostile_envs import log


class Tally:
    """Reward = number of steps; ``"end"`` ends the episode; ``"sleep:<s>"`` sleeps. Deltas show the history and pid."""

    def __init__(self, log_path: str | None = None) -> None:
        self.log_path = log_path
        self.reward, self.alive, self.history = 0.0, True, []
        log(log_path, "factory")

    def reset(self, seed: str) -> tuple[Tally, str]:
        log(self.log_path, "reset")
        self.reward, self.alive, self.history = 0.0, True, [seed]
        return self, self._say()

    def step(self, action: str) -> tuple[Tally, str]:
        name, _, arg = action.partition(":")
        if name == "sleep":
            time.sleep(float(arg))
        self.history.append(action)
        self.reward += 1.0
        self.alive = action != "end"
        return self, self._say()

    def _say(self) -> str:
        return f"{'/'.join(self.history)} in {os.getpid()}"

    def metrics(self) -> dict[str, float]:
        return {"steps": float(len(self.history) - 1)}

    def close(self) -> None:
        log(self.log_path, "close")


class Scripted(Tally):
    """A :class:`Tally` with a ``fork()`` that does what the last action says: ``"fork_raises"``, ``"fork_hangs"``,
    ``"fork_returns_self"``; otherwise it copies the history and counts its forks."""

    forks = 0

    def fork(self) -> Scripted:
        last = self.history[-1]
        if last == "fork_raises":
            raise RuntimeError("no copies today")
        if last == "fork_hangs":
            time.sleep(10**6)
        if last == "fork_returns_self":
            return self
        copy = Scripted(self.log_path)
        copy.reward, copy.alive, copy.history, copy.forks = self.reward, self.alive, [*self.history], self.forks + 1
        return copy

    def _say(self) -> str:
        return f"{super()._say()} forks {self.forks}"


class Piped:
    """Echoes each action through a ``cat`` child process it starts at reset (or, for a copy, at first use)."""

    def __init__(self) -> None:
        self.reward, self.alive, self.history = 0.0, True, []
        self.process: subprocess.Popen | None = None

    def reset(self, seed: str) -> tuple[Piped, str]:
        self.history = [seed]
        return self, self._echo(seed)

    def step(self, action: str) -> tuple[Piped, str]:
        self.history.append(action)
        self.reward += 1.0
        return self, self._echo(action)

    def _echo(self, text: str) -> str:
        if self.process is None:
            self.process = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.process.stdin.write(text + "\n")
        self.process.stdin.flush()
        return f"{self.process.stdout.readline().strip()} via {self.process.pid} after {'/'.join(self.history)}"

    def close(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()


class ForkablePiped(Piped):
    """A :class:`Piped` whose ``fork()`` copies the history and leaves the copy to start its own ``cat``."""

    def fork(self) -> ForkablePiped:
        copy = ForkablePiped()
        copy.reward, copy.alive, copy.history = self.reward, self.alive, [*self.history]
        return copy


class Socketed(Tally):
    """A :class:`Tally` holding one end of an open socket pair."""

    def reset(self, seed: str) -> tuple[Socketed, str]:
        self.connection, self.peer = socket.socketpair()
        return super().reset(seed)  # type: ignore[return-value]

    def close(self) -> None:
        self.connection.close()
        self.peer.close()
