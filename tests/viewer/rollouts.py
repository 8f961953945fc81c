"""Real rollouts of the tiny Qwen3 for the viewer tests: a guess-the-number env and a faulty one."""

from __future__ import annotations

from typing import Any

from examples.guess_number.env import GuessNumberEnv
from trl_env import ChatTemplateProcessor, Episode, TransformersGenerator, rollout
from trl_env.viewer import episode_record

TURN_END = "<|im_end|>"


class BrokenEnv(GuessNumberEnv):
    """Fails on its second step, so a page shows an env error."""

    def step(self, action: str):
        if self.turns >= 1:
            raise RuntimeError("scoreboard unavailable")
        return super().step(action)


def tiny_rollout(
    model: Any, tokenizer: Any, seeds: list[str], env: Any = GuessNumberEnv, **budgets: Any
) -> list[Episode]:
    """Episodes of the tiny model sampling at temperature 1, stopping on ``<|im_end|>``."""
    generator = TransformersGenerator(
        model, tokenizer, temperature=1.0, stop_token_ids=[tokenizer.convert_tokens_to_ids(TURN_END)]
    )
    config = {"max_turns": 3, "max_turn_tokens": 5, "max_completion_tokens": 60, **budgets}
    return rollout(env, seeds, generator, ChatTemplateProcessor(tokenizer), system_prompt="Play well.", **config)


def tiny_records(model: Any, tokenizer: Any) -> list[dict[str, Any]]:
    """Records of three kinds of rollout, as from training steps 0-2: every stop reason and an error."""
    records = []
    plans = [  # (step, env, seeds, budgets): each ends episodes a different way
        (0, GuessNumberEnv, ["3", "9", "14"], {}),  # max_turns
        (1, GuessNumberEnv, ["5", "12"], {"max_completion_tokens": 8}),  # token_budget
        (2, BrokenEnv, ["7", "1"], {"max_turns": 4}),  # env_error
        (2, lambda: GuessNumberEnv(max_turns=1), ["2", "16"], {}),  # done
    ]
    for step, env, seeds, budgets in plans:
        for episode in tiny_rollout(model, tokenizer, seeds, env, **budgets):
            records.append(
                episode_record(
                    episode,
                    tokenizer,
                    step=step,
                    success=episode.reward >= 1.0,
                    extra={"secret": int(episode.seed)},
                )
            )
    return records
