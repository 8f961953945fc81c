"""The exceptions trl-env raises on purpose: one family under :class:`TrlEnvError`.

Every exception trl-env raises on purpose derives from :class:`TrlEnvError` and keeps the builtin base
it would have had on its own (a bad value is still a ``ValueError``), so ``except TrlEnvError`` catches
anything trl-env refuses or reports, and ``except ValueError`` code keeps working.

The families here are for the raises that have no class of their own; classes that belong to one
concept stay next to it and derive from this family (``EnvError`` in ``engine.fault_policy``,
``EnvContractError`` in ``envpool.replies``, ``ChunkingError`` in ``chat.template_processor``, ...).
``docs/errors.md`` lists them all. This module imports nothing from trl-env, so any module can use it.

Example:
    >>> from trl_env.engine.config import RolloutConfig
    >>> try:
    ...     RolloutConfig(max_turns=0)
    ... except TrlEnvError as error:
    ...     print(type(error).__name__, isinstance(error, ValueError), "|", error)
    ConfigError True | RolloutConfig.max_turns must be >= 1, got 0
"""

from __future__ import annotations


class TrlEnvError(Exception):
    """The base of every exception trl-env raises on purpose: ``except TrlEnvError`` catches them all."""


class ConfigError(TrlEnvError, ValueError):
    """A setting, argument or name trl-env cannot use: a value out of range, an unknown name, two settings
    that do not go together."""


class ConfigTypeError(TrlEnvError, TypeError):
    """An argument of the wrong kind: not callable, not a string, an unknown keyword, a processor or env
    that lacks what is asked of it."""


class TemplateError(TrlEnvError, ValueError):
    """The chat template or processor cannot do what is asked (render tools, cut turns, keep its markup)."""


class DataError(TrlEnvError, ValueError):
    """Data handed to trl-env is malformed: a rollout function's columns, credit samples, transcript records."""


class BackendError(TrlEnvError, RuntimeError):
    """Something trl-env drives cannot serve the call: a generator, server or library answered what trl-env
    cannot use, is the wrong version or could not start, or the object was closed."""


class InvariantError(TrlEnvError, AssertionError):
    """An internal consistency check failed (an episode's token, mask and logprob lists disagree): a bug in a
    generator, a processor or trl-env itself, worth reporting."""
