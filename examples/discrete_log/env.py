"""Discrete logarithm with a Python tool: find x with g^x = h (mod p)."""

from __future__ import annotations

import re

from .problems import problem_for_seed
from .sandbox import run_python, truncate_text

_CODE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_ANSWER = re.compile(r"ANSWER\s*[:=]", re.IGNORECASE)
_ANSWER_VALUE = re.compile(r"ANSWER\s*[:=]\s*\**\s*(?:x\s*=\s*)?([-+]?\d+)", re.IGNORECASE)


class DiscreteLogEnv:
    """Find ``x`` with ``g^x = h (mod p)`` in at most ``max_turns`` turns, with a Python tool.

    The seed picks the problem and its difficulty: ``"d<level>-<anything>"`` (level 1:
    ``p < 50``, 2: ``p < 1000``, 3: ``p < 10**6``, 4: ``p < 10**9``, ... up to 9); any other
    seed is level 1 (see :mod:`examples.discrete_log.problems`). Each turn the agent either

    * answers with ``ANSWER: <x>`` (outside any code block; the last one counts), which ends
      the episode with reward 1.0 if ``pow(g, x, p) == h`` (any such ``x``), else 0.0; or
    * runs code: the first fenced ```` ```python ```` block (also ```` ```py ```` or a bare
      fence) is executed by :func:`~examples.discrete_log.sandbox.run_python` and its exit
      code, stdout and stderr (cut to ``max_output_chars``) come back as the observation.

    Anything else gets a format reminder. Every step uses up a turn; running out of turns
    without an answer ends the episode with reward 0.0. Nothing the agent writes raises.

    Example:
        >>> env, prompt = DiscreteLogEnv().reset("d1-example")
        >>> x = next(x for x in range(env.p) if pow(env.g, x, env.p) == env.h)
        >>> env, delta = env.step(f"Brute force gives ANSWER: {x}")
        >>> env.reward, env.alive
        (1.0, False)
    """

    def __init__(
        self,
        max_turns: int = 4,
        *,
        cpu_seconds: int = 2,
        memory_mb: int = 256,
        wall_seconds: float = 5,
        max_output_chars: int = 2000,
    ) -> None:
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self.sandbox_limits = {"cpu_seconds": cpu_seconds, "memory_mb": memory_mb, "wall_seconds": wall_seconds}
        self.max_output_chars = max_output_chars
        self.level, self.p, self.g, self.h, self.solution = 1, 5, 2, 4, 2
        self._clear()

    def _clear(self) -> None:
        self.reward: float = 0.0
        self.alive: bool = True
        self.solved = False
        self.answered = False
        self.turns = 0
        self.code_runs = 0

    def metrics(self) -> dict[str, float]:
        """Per-episode figures for evaluation (read when the episode ends): ``success`` and counters."""
        return {
            "success": float(self.solved),
        }

    def reset(self, seed: str) -> tuple[DiscreteLogEnv, str]:
        """Start the problem for ``seed``; raises ValueError for a level outside 1..9."""
        self._clear()
        problem = problem_for_seed(seed)
        self.level, self.p, self.g, self.h = problem.level, problem.p, problem.g, problem.h
        self.solution = problem.x
        prompt = (
            f"Find an integer x such that {self.g}^x = {self.h} (mod {self.p}).\n"
            f"You have {self.max_turns} turns. In each turn do exactly one of:\n"
            "- run Python code: write one fenced block starting with ```python and ending with ```; "
            "I will run it and show you its output (print what you need);\n"
            "- give your final answer on its own line, for example: ANSWER: 12\n"
            "The episode ends at your answer."
        )
        return self, prompt

    def step(self, action: str) -> tuple[DiscreteLogEnv, str]:
        if not self.alive:
            return self, "The episode is over."
        self.turns += 1
        prose = _CODE.sub("", action)
        code_blocks = _CODE.findall(action)
        answer = _parse_answer(prose)
        if answer is not None:
            delta = self._answer(answer)
        elif code_blocks:
            delta = self._run(code_blocks[0])
        elif _ANSWER.search(prose):
            delta = "Could not read your answer: write it as ANSWER: <x> with x a whole number."
        else:
            delta = "No action found: run code in a ```python block, or answer with ANSWER: <x>."
        if self.alive and self.turns >= self.max_turns:
            self.alive = False
            delta += "\nOut of turns without an answer."
        elif self.alive:
            left = self.max_turns - self.turns
            delta += "\nThis is your last turn: answer with ANSWER: <x>." if left == 1 else f"\n{left} turns left."
        return self, delta

    def _answer(self, x: int) -> str:
        self.answered, self.alive = True, False
        self.solved = pow(self.g, x, self.p) == self.h  # a negative x works too: g is invertible mod p
        self.reward = float(self.solved)
        if self.solved:
            return f"Correct: {self.g}^{x} = {self.h} (mod {self.p})."
        shown = str(x) if len(str(x)) <= 40 else "x"
        return f"Wrong: {self.g}^{shown} = {pow(self.g, x, self.p)} (mod {self.p}), not {self.h}."

    def _run(self, code: str) -> str:
        self.code_runs += 1
        result = run_python(code, max_output_chars=self.max_output_chars, **self.sandbox_limits)
        status = f"Exit code {result.exit_code}" + (f" ({result.killed_reason})" if result.killed_reason else "")
        body = f"stdout:\n{result.stdout}" if result.stdout else "stdout: (empty)"
        if result.stderr:
            body += f"\nstderr:\n{result.stderr}"
        return f"{status}.\n{truncate_text(body, self.max_output_chars)}"


def _parse_answer(prose: str) -> int | None:
    """The integer of the last ``ANSWER: <x>`` in ``prose``, or None."""
    values = _ANSWER_VALUE.findall(prose)
    try:
        return int(values[-1]) if values else None
    except ValueError:  # more digits than Python will convert
        return None
