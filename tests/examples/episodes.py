"""Play a scripted episode on an example env (shared by the example tests)."""

from __future__ import annotations

from trl_env.core import Env


def play(env: Env, seed: str, actions: list[str]) -> tuple[Env, list[str]]:
    """Reset ``env`` with ``seed``, take ``actions`` in order; the env after them and each step's text."""
    env, _ = env.reset(seed)
    deltas = []
    for action in actions:
        env, delta = env.step(action)
        deltas.append(delta)
    return env, deltas
