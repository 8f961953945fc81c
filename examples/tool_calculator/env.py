"""``Calculator``: a class in the shape TRL's ``GRPOTrainer(environment_factory=...)`` takes.

Its public methods are the tools; ``reset`` gets the dataset row (its ``prompt`` is the question)
and ``get_reward`` scores the episode. The ``success`` property is not part of TRL's contract (TRL
ignores it): trl-env reports it as the ``success`` metric that ``trl-env eval`` and the viewer count.
trl-env runs it unchanged through
:func:`trl_env.adapters.trl_environment.trl_environment`::

    make_rollout_func(trl_environment(Calculator), max_turns=4)
    trl-env eval --env trl_env.adapters.trl_environment:trl_environment \\
        --env-kwargs '{"environment": "examples.tool_calculator:Calculator"}' ...

Example:
    >>> env = Calculator()
    >>> env.reset(prompt=[{"role": "user", "content": "What is 6 * 7 + 1?"}])
    ' Use the tools, then give the answer with answer().'
    >>> env.multiply(6, 7), env.add(42, 1), env.answer(43), env.get_reward(), env.success
    (42, 43, 'Correct.', 1.0, True)
"""

from __future__ import annotations

import random
import re
from typing import Any


class Calculator:
    """Answer ``What is A * B + C?`` by calling ``multiply``, ``add`` and ``answer``."""

    def __init__(self) -> None:
        self.target: int | None = None
        self.answered: int | None = None

    def reset(self, **kwargs: Any) -> str:
        """Read the question from the row's prompt; clear the last episode's answer."""
        prompt = kwargs.get("prompt") or [{"content": ""}]
        question = prompt[-1]["content"] if isinstance(prompt, list) else str(prompt)
        numbers = [int(n) for n in re.findall(r"-?\d+", question)]
        self.target = numbers[0] * numbers[1] + (numbers[2] if len(numbers) > 2 else 0) if len(numbers) >= 2 else None
        self.answered = None
        return " Use the tools, then give the answer with answer()."

    def multiply(self, a: int, b: int) -> int:
        """Multiply two integers.

        Args:
            a: The first factor.
            b: The second factor.

        Returns:
            The product.
        """
        return a * b

    def add(self, a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first term.
            b: The second term.

        Returns:
            The sum.
        """
        return a + b

    def answer(self, value: int) -> str:
        """Give the final answer to the question (once).

        Args:
            value: The answer.

        Returns:
            Whether it is correct.
        """
        if self.answered is not None:
            raise ValueError("the answer was already given")
        self.answered = value
        return "Correct." if value == self.target else "Wrong."

    @property
    def success(self) -> bool:
        """Whether the correct answer was given."""
        return self.answered is not None and self.answered == self.target

    def get_reward(self) -> float:
        """1.0 for a correct answer, else 0.0."""
        return float(self.success)


def problems(count: int, seed: int = 0) -> list[str]:
    """``count`` questions ``What is A * B + C?`` (the prompts, hence the seeds, of the episodes).

    Example:
        >>> problems(2)
        ['What is 8 * 8 + 1?', 'What is 6 * 9 + 7?']
    """
    rng = random.Random(seed)
    return [f"What is {rng.randint(2, 9)} * {rng.randint(2, 9)} + {rng.randint(1, 9)}?" for _ in range(count)]
