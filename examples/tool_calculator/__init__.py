"""A tool-calling arithmetic task, written for TRL's ``environment_factory`` and run unchanged by trl-env."""

from .env import Calculator, problems

__all__ = ["Calculator", "problems"]
