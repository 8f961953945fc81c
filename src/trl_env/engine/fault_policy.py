"""The errors of env calls, and the fault policy.

A call that raises, times out or crashes its worker is an *environment fault*
(:class:`~trl_env.envpool.pool.EnvFault`): under ``on_env_error="fail_episode"`` (default) it
ends that episode, under ``"raise"`` it stops the rollout with :class:`EnvError` naming the factory,
seed and turn. A call that returns the wrong types breaks the protocol: that is a bug in the
environment, not a fault, and always raises :class:`EnvContractError` at the first offending call.

Example:
    >>> issubclass(EnvContractError, TypeError), issubclass(EnvError, RuntimeError)
    (True, True)
"""

from __future__ import annotations

from trl_env.envpool.replies import EnvContractError
from trl_env.errors import TrlEnvError

__all__ = ["EnvContractError", "EnvError"]


class EnvError(TrlEnvError, RuntimeError):
    """An environment raised, timed out or crashed under ``on_env_error="raise"``."""
