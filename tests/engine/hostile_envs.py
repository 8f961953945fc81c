"""Environments that hang, raise, crash or lie: importable, so process workers can unpickle them.

:class:`Hostile` does what its seed (at reset) or its action (at step) says, e.g. ``"sleep:8"``,
``"raise:SystemExit"``, ``"os_exit"``, ``"segv"``, ``"reward:bool"``. Every env writes what
happens to it (``factory``, ``reset``, ``close``...) to a log file when given one, since a
process worker's env lives in another process.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from pathlib import Path

import numpy as np
import torch

EXCEPTIONS = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": lambda: KeyboardInterrupt("from the env"),
    "GeneratorExit": lambda: GeneratorExit("from the env"),
    "ValueError": lambda: ValueError("bad seed"),
}
REWARDS = {
    "bool": True,
    "nan": float("nan"),
    "inf": float("inf"),
    "str": "1.0",
    "np": np.float32(0.5),
    "np_int": np.int64(2),
    "torch": torch.tensor(0.25),
    "torch_vector": torch.tensor([0.25, 0.5]),
}


def log(path: str | None, event: str) -> None:
    """Append one line (``event pid``) to ``path``; one small O_APPEND write, safe across processes."""
    if path:
        with open(path, "a") as file:
            file.write(f"{event} {os.getpid()}\n")


def events(path: Path) -> list[str]:
    """The events logged so far, without pids."""
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


class Hostile:
    """Behaves as its seed / action commands: ``"ok"``, ``"sleep:<s>"``, ``"hang"``, ``"wait_forever"``,
    ``"raise:<name>"``, ``"os_exit"``, ``"segv"``, ``"reward:<kind>"``, ``"alive:np"``, ``"delta:int"``."""

    def __init__(self, log_path: str | None = None) -> None:
        self.log_path = log_path
        self.reward, self.alive, self.turn = 0.0, True, 0
        log(log_path, "factory")

    def reset(self, seed: str) -> tuple[Hostile, str]:
        log(self.log_path, "reset")
        self.seed, self.reward, self.alive, self.turn = seed, 0.0, True, 0
        return self._obey(seed)

    def step(self, action: str) -> tuple[Hostile, str]:
        self.turn += 1
        self.reward = float(self.turn)
        return self._obey(action)

    def _obey(self, command: str) -> tuple[Hostile, str]:
        name, _, arg = command.partition(":")
        if name == "sleep":
            time.sleep(float(arg))
        elif name == "hang":
            time.sleep(10**6)
        elif name == "wait_forever":
            threading.Event().wait()
        elif name == "raise":
            raise EXCEPTIONS[arg]()
        elif name == "os_exit":
            os._exit(3)
        elif name == "segv":
            ctypes.string_at(0)
        elif name == "reward":
            self.reward = REWARDS[arg]
        elif name == "alive":
            self.alive = np.bool_(False)
        elif name == "delta":
            return self, 42  # type: ignore[return-value]
        return self, f"{command} done (turn {self.turn})"

    def metrics(self) -> dict[str, float]:
        log(self.log_path, "metrics")
        return {"turns": np.int64(self.turn), "reward": self.reward}

    def close(self) -> None:
        log(self.log_path, "close")


class Plain:
    """An env with neither ``metrics()`` nor ``close()``."""

    reward, alive = 0.0, True

    def reset(self, seed: str) -> tuple[Plain, str]:
        return self, seed

    def step(self, action: str) -> tuple[Plain, str]:
        return self, action


class Successor(Plain):
    """What :class:`Handover` hands over to: its steps say so."""

    def step(self, action: str) -> tuple[Successor, str]:
        return self, f"successor got {action}"


class Handover(Plain):
    """``reset`` returns a different object; the pool must continue with that one."""

    def reset(self, seed: str) -> tuple[Successor, str]:
        return Successor(), seed


def not_an_env() -> object:
    """A factory that returns something with no ``reset``/``step``."""
    return object()


def raising_factory() -> Hostile:
    """A factory that fails."""
    raise RuntimeError("no backend")


PICKLED: list[str] = []  # one entry per pickling of a CountsPickles, in this process


class CountsPickles:
    """A factory argument that notes in :data:`PICKLED` each time it is pickled."""

    def __reduce__(self) -> tuple[type, tuple]:
        PICKLED.append("pickled")
        return (CountsPickles, ())


def plain_with(tag: object) -> Plain:
    """A factory taking an argument (bind one with ``functools.partial``)."""
    return Plain()
