"""Vault doors: the first answer picks a door (only one leads on), the rest crack a code."""

from .env import VaultDoorsEnv, door_for_seed, interleave_doors

__all__ = ["VaultDoorsEnv", "door_for_seed", "interleave_doors"]
