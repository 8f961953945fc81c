"""``RolloutConfig``: every budget and policy of a rollout, in one place.

``rollout()``, :class:`~trl_env.engine.rollout.RolloutEngine`, ``make_rollout_func``, ``evaluate``
and the ``trl-env eval/train`` flags (generated from these fields) all take or build one, so each
default is written once, here. Values are checked when the config is built, not at the first
training step.

Example:
    >>> RolloutConfig(max_turns=3).max_turn_tokens
    256
    >>> RolloutConfig(max_turns=0)
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigError: RolloutConfig.max_turns must be >= 1, got 0
    >>> RolloutConfig.from_kwargs(max_turn=3)
    Traceback (most recent call last):
    ...
    trl_env.errors.ConfigTypeError: unknown rollout setting 'max_turn'; the RolloutConfig fields are: system_prompt, ...
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from trl_env.engine.tree import TreeShape
from trl_env.envpool.ray_cluster import check_ray_resources
from trl_env.errors import ConfigError, ConfigTypeError

OnEnvError = Literal["fail_episode", "raise"]
ON_ENV_ERROR: tuple[str, ...] = ("fail_episode", "raise")
EnvIsolation = Literal["auto", "process", "thread", "ray"]
ENV_ISOLATION: tuple[str, ...] = ("auto", "process", "thread", "ray")
Schedule = Literal["episode", "turn"]
SCHEDULE: tuple[str, ...] = ("episode", "turn")
History = Literal["full", "template", "window"]
HISTORY: tuple[str, ...] = ("full", "template", "window")
ZeroVariance = Literal["keep", "filter", "resample"]
ZERO_VARIANCE: tuple[str, ...] = ("keep", "filter", "resample")


def _doc(text: str, **extra: Any) -> Any:
    return {"help": text, **extra}


@dataclass(frozen=True)
class RolloutConfig:
    """Budgets and policies of a rollout (every field is also a ``trl-env eval/train`` flag).

    The episode token budget has one source. When training, it is the trainer's
    ``GRPOConfig.max_completion_length``: ``make_rollout_func`` uses it when ``max_completion_tokens`` is None
    and refuses a larger value (a smaller one is a tighter budget per episode); ``build_trainer`` and
    ``trl-env train`` write ``max_completion_tokens`` (1024 when None) into that field. Elsewhere
    (``rollout()``, ``evaluate``) ``max_completion_tokens`` is the budget, and None means none.
    """

    system_prompt: str = field(default="", metadata=_doc("system prompt of every episode (empty: none)"))
    max_turns: int = field(default=8, metadata=_doc("model turns per episode"))
    max_turn_tokens: int = field(default=256, metadata=_doc("sampled tokens per model turn"))
    max_completion_tokens: int | None = field(
        default=None,
        metadata=_doc(
            "completion tokens per episode, env tokens included; None: when training the trainer's "
            "max_completion_length (a value here must not exceed it; trl-env train: 1024), else no episode budget"
        ),
    )
    max_env_tokens: int = field(
        default=2048, metadata=_doc("an env delta (or one tool result) longer than this many tokens is cut and marked")
    )
    env_workers: int = field(default=16, metadata=_doc("env workers: envs running at once (more episodes queue)"))
    env_isolation: EnvIsolation = field(
        default="auto",
        metadata=_doc(
            "where env code runs: 'process' (killable child processes: survive hangs, crashes, sys.exit), "
            "'thread' (cheaper; a hung call is abandoned), 'auto' (process when the factory is importable), "
            "'ray' (one Ray actor per env, on the cluster at ray_address: docs/ray.md)",
            choices=ENV_ISOLATION,
        ),
    )
    ray_address: str | None = field(
        default=None,
        metadata=_doc(
            "env_isolation='ray': the Ray cluster, e.g. '10.0.0.5:6379' or 'auto'; None: $RAY_ADDRESS, else a "
            "local instance started for the run"
        ),
    )
    ray_resources: dict[str, Any] | None = field(
        default=None,
        metadata=_doc(
            "env_isolation='ray': what each env actor asks of its node, as JSON: num_cpus, num_gpus, memory "
            "(bytes), resources (custom, e.g. {\"sandbox\": 1}), scheduling_strategy ('SPREAD', default, or "
            "'DEFAULT'); None: Ray's default (1 CPU to be placed)",
            parse=json.loads,
        ),
    )
    reuse_envs: bool = field(
        default=False, metadata=_doc("keep env objects in their workers and warm-reset them for the next episode")
    )
    env_timeout: float | None = field(
        default=60.0, metadata=_doc("seconds one reset/step may take before it is a fault (None: no limit)")
    )
    on_env_error: OnEnvError = field(
        default="fail_episode",
        metadata=_doc(
            "an env that raises or times out: fail only that episode, or raise EnvError", choices=ON_ENV_ERROR
        ),
    )
    failure_reward: float | None = field(
        default=None,
        metadata=_doc(
            "reward of an episode whose env failed; None: unscorable (TRL leaves it out of its group's "
            "baseline and trains nothing on it)"
        ),
    )
    schedule: Schedule = field(
        default="episode",
        metadata=_doc(
            "'episode': each episode advances as soon as its env answers, ready contexts are batched per "
            "generator call; 'turn': every episode waits for the slowest env of its turn",
            choices=SCHEDULE,
        ),
    )
    gather_window: float | None = field(
        default=None,
        metadata=_doc(
            "schedule='episode': the longest a generator call waits for more envs to answer, in seconds "
            "(bigger batches against idle time); None: half a call's fixed cost, fitted to the calls so far"
        ),
    )
    max_batch: int | None = field(
        default=None, metadata=_doc("schedule='episode': most contexts per generator call (None: no cap)")
    )
    tree: TreeShape | None = field(
        default=None,
        metadata=_doc(
            "tree rollouts: fork each episode after the given model turns, e.g. '1x4' (after turn 1, 4 branches) "
            "or '1,3x2'; every block of leaves-per-root equal seeds is played as one root (None: no forks)",
            parse=TreeShape.parse,
        ),
    )
    history: History = field(
        default="full",
        metadata=_doc(
            "what the model sees of earlier turns: 'full' (one growing sequence per episode, trained as one "
            "sample), 'template' (each model turn is its own sample, prompted with the chat template's rendering "
            "of the conversation so far), 'window' (as template, keeping the system prompt, the first observation "
            "and the last history_window turns)",
            choices=HISTORY,
        ),
    )
    history_window: int = field(
        default=4, metadata=_doc("history='window': the earlier model turns (with the env's answers) each prompt keeps")
    )
    max_turn_samples: int | None = field(
        default=None,
        metadata=_doc(
            "history='template'/'window': most turn samples trained per step and process; beyond it every episode "
            "keeps an equal share of its turns, drawn at random and reweighted (None: all)"
        ),
    )
    zero_variance: ZeroVariance = field(
        default="keep",
        metadata=_doc(
            "training: GRPO groups whose rewards are all equal (advantage 0): 'keep' them, 'filter' them out of the "
            "loss, or 'resample' (replace each by a group of a new dataset seed, up to max_extra_episodes; any left "
            "are filtered): docs/zero_variance.md",
            choices=ZERO_VARIANCE,
        ),
    )
    max_extra_episodes: int | None = field(
        default=None,
        metadata=_doc(
            "zero_variance='resample': most replacement episodes played per step and process (None: as many as "
            "the step's own episodes)"
        ),
    )
    check_invariants: bool = field(
        default=True, metadata=_doc("check every episode's token/mask/logprob invariants after a rollout")
    )

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.type in ("int", "int | None") and value is not None:
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigTypeError(f"RolloutConfig.{f.name} must be an int, got {value!r}")
                if value < 1:
                    raise ConfigError(f"RolloutConfig.{f.name} must be >= 1, got {value}")
        if self.env_timeout is not None and not (
            isinstance(self.env_timeout, int | float) and math.isfinite(self.env_timeout) and self.env_timeout > 0
        ):
            raise ConfigError(
                f"RolloutConfig.env_timeout must be a positive number of seconds, got {self.env_timeout!r}"
            )
        if self.env_isolation not in ENV_ISOLATION:
            raise ConfigError(f"RolloutConfig.env_isolation must be one of {ENV_ISOLATION}, got {self.env_isolation!r}")
        if self.ray_resources is not None:
            check_ray_resources(self.ray_resources)
        if self.ray_address is not None and not isinstance(self.ray_address, str):
            raise ConfigTypeError(f"RolloutConfig.ray_address must be a str or None, got {self.ray_address!r}")
        if self.schedule not in SCHEDULE:
            raise ConfigError(f"RolloutConfig.schedule must be one of {SCHEDULE}, got {self.schedule!r}")
        window = self.gather_window
        if window is not None and (
            isinstance(window, bool) or not (isinstance(window, int | float) and math.isfinite(window) and window >= 0)
        ):
            raise ConfigError(f"RolloutConfig.gather_window must be a number of seconds >= 0 or None, got {window!r}")
        if self.on_env_error not in ON_ENV_ERROR:
            raise ConfigError(f"RolloutConfig.on_env_error must be one of {ON_ENV_ERROR}, got {self.on_env_error!r}")
        if self.failure_reward is not None and (
            not isinstance(self.failure_reward, int | float) or not math.isfinite(self.failure_reward)
        ):
            raise ConfigError(f"RolloutConfig.failure_reward must be a finite number, got {self.failure_reward!r}")
        if self.zero_variance not in ZERO_VARIANCE:
            raise ConfigError(f"RolloutConfig.zero_variance must be one of {ZERO_VARIANCE}, got {self.zero_variance!r}")
        if self.history not in HISTORY:
            raise ConfigError(f"RolloutConfig.history must be one of {HISTORY}, got {self.history!r}")
        if self.tree is not None and not isinstance(self.tree, TreeShape):
            raise ConfigTypeError(f"RolloutConfig.tree must be a TreeShape or None, got {self.tree!r}")
        if not isinstance(self.system_prompt, str):
            raise ConfigTypeError(f"RolloutConfig.system_prompt must be a str, got {type(self.system_prompt).__name__}")

    @property
    def per_turn(self) -> bool:
        """True when every model turn is its own training sample (``history`` is ``"template"`` or ``"window"``).

        Example:
            >>> RolloutConfig().per_turn, RolloutConfig(history="window").per_turn
            (False, True)
        """
        return self.history != "full"

    @classmethod
    def from_kwargs(cls, base: RolloutConfig | None = None, **overrides: Any) -> RolloutConfig:
        """``base`` (or the defaults) with ``overrides`` applied; an unknown name is a ``TypeError``.

        Args:
            base: the config to start from; the defaults when None.
            **overrides: field values to change.

        Returns:
            A new, validated config.

        Example:
            >>> RolloutConfig.from_kwargs(RolloutConfig(max_turns=2), max_turn_tokens=8).max_turns
            2
        """
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = [name for name in overrides if name not in names]
        if unknown:
            raise ConfigTypeError(
                f"unknown rollout setting {unknown[0]!r}; the RolloutConfig fields are: {', '.join(names)}"
            )
        return dataclasses.replace(base or cls(), **overrides)
