"""trl-env: train LLM agents with RL on multi-turn text environments, on top of TRL.

Example:
    >>> from trl_env import Env, Processor, Action, Delta, Seed
    >>> Action is str
    True
"""

from trl_env.additivity import AdditivityReport, check_additivity
from trl_env.caching_generators import EpisodeCacheGenerator, PrefixCachingGenerator
from trl_env.chat_chunks import ChatChunks
from trl_env.chat_template_processor import ChatTemplateProcessor, ChunkingError
from trl_env.chunked_processor import ChunkedProcessor
from trl_env.core import Action, Delta, Env, Language, Processor, Seed
from trl_env.engine import RolloutConfig, RolloutEngine, rollout
from trl_env.env_calls import EnvContractError, EnvError
from trl_env.episode import Episode, Turn
from trl_env.generator import Generation, Generator
from trl_env.presets import PRESETS, preset
from trl_env.transformers_generator import TransformersGenerator
from trl_env.trl_glue import NonAdditiveProcessorError, env_reward, make_rollout_func

__all__ = [
    "Action", "AdditivityReport", "ChatChunks", "ChatTemplateProcessor", "check_additivity", "ChunkedProcessor",
    "ChunkingError", "Delta", "Env", "env_reward", "EnvContractError", "EnvError", "Episode",
    "EpisodeCacheGenerator", "Generation", "Generator", "Language", "make_rollout_func",
    "NonAdditiveProcessorError", "PrefixCachingGenerator", "preset", "PRESETS", "Processor", "rollout",
    "RolloutConfig", "RolloutEngine", "Seed", "TransformersGenerator", "Turn",
]
