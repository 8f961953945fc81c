"""trl-env: train LLM agents with RL on multi-turn text environments, on top of TRL.

The names below are what a user needs; everything else stays importable from its module
(``trl_env.chat.presets``, ``trl_env.generation.vllm_engine``, ...). They load on first use,
so that ``import trl_env`` (and ``trl-env --help``) does not import torch and transformers.

Example:
    >>> import trl_env
    >>> trl_env.Action is str, trl_env.RolloutConfig(max_turns=3).max_turns
    (True, 3)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from trl_env.core import Action, Delta, Env, Language, Processor, Seed

# public name -> module that defines it
_LAZY = {
    "Episode": "trl_env.episode",
    "RolloutConfig": "trl_env.engine.config",
    "rollout": "trl_env.engine.rollout",
    "RolloutEngine": "trl_env.engine.rollout",
    "EnvError": "trl_env.engine.fault_policy",
    "EnvContractError": "trl_env.envpool.replies",
    "ChatTemplateProcessor": "trl_env.chat.template_processor",
    "ChunkedProcessor": "trl_env.chat.chunked_processor",
    "ChatChunks": "trl_env.chat.chunks",
    "preset": "trl_env.chat.presets",
    "check_additivity": "trl_env.checks.additivity",
    "TransformersGenerator": "trl_env.generation.transformers_generator",
    "EpisodeCacheGenerator": "trl_env.generation.kv_cache",
    "make_rollout_func": "trl_env.trainer.rollout_func",
    "env_reward": "trl_env.trainer.rollout_func",
    "EnvRolloutWorker": "trl_env.trainer.async_worker",
    "TurnLevelGRPOTrainer": "trl_env.trainer.turn_level_grpo",
    "SampledTokenGRPOTrainer": "trl_env.trainer.sampled_token_scoring",
    "NonAdditiveProcessorError": "trl_env.trainer.rollout_func",
    "evaluate": "trl_env.evaluation",
    "check_env": "trl_env.checks.env",
    "TrlEnvError": "trl_env.errors",
    "agent_env": "trl_env.agents.agent_env",
}

__all__ = ["Action", "Delta", "Env", "Language", "Processor", "Seed", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'trl_env' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from trl_env.agents.agent_env import agent_env
    from trl_env.chat.chunked_processor import ChunkedProcessor
    from trl_env.chat.chunks import ChatChunks
    from trl_env.chat.presets import preset
    from trl_env.chat.template_processor import ChatTemplateProcessor
    from trl_env.checks.additivity import check_additivity
    from trl_env.checks.env import check_env
    from trl_env.engine.config import RolloutConfig
    from trl_env.engine.fault_policy import EnvContractError, EnvError
    from trl_env.engine.rollout import RolloutEngine, rollout
    from trl_env.episode import Episode
    from trl_env.errors import TrlEnvError
    from trl_env.evaluation import evaluate
    from trl_env.generation.kv_cache import EpisodeCacheGenerator
    from trl_env.generation.transformers_generator import TransformersGenerator
    from trl_env.trainer.async_worker import EnvRolloutWorker
    from trl_env.trainer.rollout_func import NonAdditiveProcessorError, env_reward, make_rollout_func
    from trl_env.trainer.sampled_token_scoring import SampledTokenGRPOTrainer
    from trl_env.trainer.turn_level_grpo import TurnLevelGRPOTrainer
