"""Discrete logarithm: find x with g^x = h (mod p), with a sandboxed Python tool."""

from .env import DiscreteLogEnv
from .problems import problem_for_seed
from .sandbox import SandboxResult, run_python

__all__ = ["DiscreteLogEnv", "SandboxResult", "problem_for_seed", "run_python"]
