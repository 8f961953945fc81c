"""The demo's recipe: its prompt settings, its credit assignment and the budgets of one run (:class:`DemoPlan`).

Example:
    >>> DemoPlan.full(minutes=10).advantage == DEMO_ADVANTAGE, DemoPlan.full(minutes=10).beta, ANSWER_PREFIX
    (True, 0.04, 'My guess:')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # trl_env is imported when a rollout config is built, after run_demo.py set the environment
    from trl_env.engine.config import RolloutConfig

SYSTEM_PROMPT = ""  # empty: the chat template's own default system prompt
ANSWER_PREFIX = "My guess:"  # opens every assistant turn (prefilled): the model continues with a number
# the demo's credit assignment: chosen by experiments/credit_assignment.py (docs/credit_assignment.md)
DEMO_ADVANTAGE, DEMO_TREE, SMOKE_TREE = "episode", None, "1x2"
# the demo's KL penalty to the untrained model: kept 5 of 5 training seeds from collapsing, where plain GRPO
# (beta 0) lost one (docs/credit_assignment.md#guarding-against-the-collapse-a-kl-penalty-and-a-lower-learning-rate)
DEMO_BETA = 0.04


@dataclass
class DemoPlan:
    """Budgets of one demo run.

    Example:
        >>> DemoPlan.full(minutes=10).eval_episodes, DemoPlan.smoke().eval_episodes
        (128, 4)
    """

    minutes: float
    max_steps: int
    eval_episodes: int
    num_generations: int
    prompts_per_step: int
    advantage: str = "episode"  # the credit assignment (trl_env.trainer.advantages)
    tree: str | None = None  # tree rollouts' shape, e.g. "1,2x2", with advantage "tree"
    max_turns: int = 5
    max_turn_tokens: int = 6
    max_completion_tokens: int = 128
    history: str = "full"  # what each model turn sees of earlier turns (RolloutConfig.history, docs/history.md)
    history_window: int = 4  # history "window": the earlier turns each prompt keeps
    lr: float = 5e-4
    keep_best: bool = False  # end on the weights of the best 6-step stretch of training success (trainer.keep_best)
    lr_decay: str = "steps"  # "steps": TRL's linear decay over max_steps (flat in a minutes-bound run); "minutes"
    beta: float = 0.0  # KL penalty to the model before training (0: no reference model to run)
    temperature: float = 1.0  # training's sampling temperature; evaluation samples at 1
    loss_type: str | None = None  # TRL's GRPO loss (None: TRL's default, "dapo")
    epsilon_high: float | None = None  # the upper clip ("clip-higher"; None: TRL's default, the lower clip 0.2)
    num_iterations: int | None = None  # optimizer steps per batch of episodes (the GRPO paper's mu; None: TRL's 1)
    lora_r: int = 16
    eval_batch_size: int = 32

    @classmethod
    def full(cls, minutes: float) -> DemoPlan:
        """The real demo: 128 held-out episodes, 2 secrets x 8 episodes per step."""
        return cls(
            minutes=minutes,
            max_steps=10_000,
            eval_episodes=128,
            num_generations=8,
            prompts_per_step=2,
            advantage=DEMO_ADVANTAGE,
            tree=DEMO_TREE,
            beta=DEMO_BETA,
        )

    @classmethod
    def smoke(cls) -> DemoPlan:
        """A few seconds of everything, for tests."""
        return cls(
            minutes=5.0,
            max_steps=2,
            eval_episodes=4,
            num_generations=2,
            prompts_per_step=2,
            max_turns=2,
            max_turn_tokens=4,
            max_completion_tokens=48,
            eval_batch_size=4,
            advantage=DEMO_ADVANTAGE,
            tree=SMOKE_TREE if DEMO_TREE else None,  # 2 samples per group: a tree of 2 leaves
        )

    def rollout_config(self, tree: str | None = None) -> RolloutConfig:
        """The rollout budgets shared by evaluation and training (``tree``: training's tree shape, e.g. ``"1x4"``)."""
        from trl_env.engine.config import RolloutConfig
        from trl_env.engine.tree import TreeShape

        return RolloutConfig(
            system_prompt=SYSTEM_PROMPT,
            max_turns=self.max_turns,
            max_turn_tokens=self.max_turn_tokens,
            max_completion_tokens=self.max_completion_tokens,
            history=self.history,
            history_window=self.history_window,
            tree=TreeShape.parse(tree) if tree else None,
        )
