"""The two protocols of trl-env: an environment and a processor.

Everything else in the package is built around these. They are kept tiny on purpose:
an environment speaks plain text in and out, and a processor turns that text into the
chat-formatted strings a model sees and turns the model's answer back into an action.

Example:
    >>> class Echo:
    ...     reward, alive = 0.0, True
    ...     def reset(self, seed):
    ...         return self, f"Say {seed}."
    ...     def step(self, action):
    ...         self.reward, self.alive = float(action == "hi"), False
    ...         return self, "done"
    >>> env, delta = Echo().reset("hi")
    >>> env, delta = env.step("hi")
    >>> env.reward, env.alive
    (1.0, False)
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

Action = str
Delta = str
Seed = str
Language = str


@runtime_checkable
class Env(Protocol):
    """A multi-turn text environment.

    ``reset`` and ``step`` may return ``self`` or a new object; the engine always
    continues with the one returned. ``reward`` is the episode's score so far and
    ``alive`` turns False when the episode is over.
    """

    reward: float
    alive: bool

    def reset(self, seed: Seed) -> tuple[Env, Delta]: ...

    def step(self, action: Action) -> tuple[Env, Delta]: ...


@runtime_checkable
class Processor(Protocol):
    """Renders environment text into chat chunks and parses the model's answer."""

    def init_system_input(self, prompt: Language) -> str: ...

    def append_user_input(self, prompt: Language) -> str: ...

    def parse_agent_output(self, completion: Language) -> tuple[str, str]: ...  # (reasoning, action)
