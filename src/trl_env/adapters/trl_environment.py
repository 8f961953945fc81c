"""Run a class written for TRL's ``GRPOTrainer(environment_factory=...)`` unchanged.

A TRL environment class has ``reset(**kwargs) -> str | None``, public methods that are its tools
(type hints and a Google-style docstring each), and optionally ``get_reward() -> float``. To
migrate, pass the same class::

    make_rollout_func(trl_environment(MyToolEnv), max_turns=max_tool_calling_iterations + 1)

The semantics are TRL 1.16's (``GRPOTrainer._tool_call_loop``):

* ``reset`` gets the dataset row's ``prompt`` as a conversation (``[{"role": "user", "content": seed}]``);
  its return value is appended to the user message, so the first delta is ``seed + observation``;
* the tools are the class's public functions except ``reset`` and ``get_reward``;
* every call of a turn runs in order; a tool that raises, an unknown tool and a malformed call each
  answer ``str({"error": message})``; any other result answers ``str(result)``, as a ``tool`` message;
* a turn without tool calls ends the episode, as does the ``max_tool_calling_iterations``-th
  tool turn's successor (TRL's loop bound; then that turn's calls are not run);
* the reward is ``get_reward()`` (0.0 without it), read after every step.

Beyond TRL: strings in the arguments and the results have lone surrogates (``"\\ud800"`` in the
model's JSON, a ``surrogateescape`` file name) replaced by U+FFFD, since no tokenizer can encode
them; and when the instance has a ``success`` attribute that is not a method (a bool the class sets,
e.g. in its ``answer`` tool), ``metrics()`` reports it as ``success``. TRL has no success signal of
its own and ``get_reward()`` is none (partial credit or shaping would count as solved), so without
that attribute there is no ``success`` metric.

Example:
    >>> from examples.tool_calculator import Calculator
    >>> env, delta = TRLEnvironment(Calculator).reset("What is 6 * 7?")
    >>> [tool.__name__ for tool in env.tools], delta
    (['add', 'answer', 'multiply'], 'What is 6 * 7? Use the tools, then give the answer with answer().')
    >>> env, _ = env.step('<tool_call>{"name": "multiply", "arguments": {"a": 6, "b": 7}}</tool_call>')
    >>> env.tool_results, env.alive
    ((ToolResult(name='multiply', content='42'),), True)
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from trl_env.adapters.actions import valid_unicode
from trl_env.adapters.seeds import resolve
from trl_env.chat.tool_calls import coerce_arguments, parse_tool_calls, tool_schema
from trl_env.core import ToolResult
from trl_env.errors import ConfigTypeError


def _valid_arguments(value: Any) -> Any:
    """``value`` (parsed JSON) with every string, keys included, made valid Unicode."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, dict):
        return {_valid_arguments(key): _valid_arguments(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_valid_arguments(item) for item in value]
    return value


def tool_methods(instance: object) -> list[Callable[..., Any]]:
    """The tools of a TRL environment instance: its public functions but ``reset`` and ``get_reward``, bound.

    Listed on the class, as TRL does (listing the instance would evaluate its properties).

    Example:
        >>> from examples.tool_calculator import Calculator
        >>> [method.__name__ for method in tool_methods(Calculator())]
        ['add', 'answer', 'multiply']
    """
    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(type(instance), predicate=inspect.isfunction)
        if name not in ("reset", "get_reward") and not name.startswith("_")
    ]


class TRLEnvironment:
    """A trl-env :class:`~trl_env.core.Env` (and :class:`~trl_env.core.UsesTools`) around a TRL environment class.

    Args:
        environment_class: the class (or zero-argument factory) given to TRL's ``environment_factory``.
        max_tool_calling_iterations: TRL's ``GRPOConfig.max_tool_calling_iterations``: tool turns run
            at most; None: no bound (``max_turns`` still ends the episode).
    """

    def __init__(self, environment_class: Callable[[], Any], max_tool_calling_iterations: int | None = None) -> None:
        self.inner = environment_class()
        if not callable(getattr(type(self.inner), "reset", None)):
            raise ConfigTypeError(f"{type(self.inner).__name__} has no reset(): TRL's environment_factory requires one")
        self.max_iterations = max_tool_calling_iterations
        self._tools = tool_methods(self.inner)
        self._by_name = {tool.__name__: tool for tool in self._tools}
        self._schemas = {tool.__name__: tool_schema(tool) for tool in self._tools}
        self._reward_of = self.inner.get_reward if callable(getattr(type(self.inner), "get_reward", None)) else None
        self.reward, self.alive = 0.0, True
        self.tool_results: tuple[ToolResult, ...] = ()
        self.calls = self.failures = self.iterations = 0

    @property
    def tools(self) -> list[Callable[..., Any]]:
        """The environment's tool methods (declared to the model as the chat template renders them)."""
        return self._tools

    def reset(self, seed: str) -> tuple[TRLEnvironment, str]:
        """Reset the TRL environment with the row's prompt; the first delta is the prompt plus its observation."""
        observation = self.inner.reset(prompt=[{"role": "user", "content": seed}])
        self.reward, self.alive, self.tool_results = 0.0, True, ()
        self.calls = self.failures = self.iterations = 0
        return self, seed + (observation if isinstance(observation, str) else "")

    def step(self, action: str) -> tuple[TRLEnvironment, str]:
        """Run the turn's tool calls; a turn without calls (or past the iteration bound) ends the episode."""
        _, calls = parse_tool_calls(action)
        over = self.max_iterations is not None and self.iterations >= self.max_iterations
        if not calls or over:
            self.alive, self.tool_results = False, ()
        else:
            self.iterations += 1
            self.tool_results = tuple(ToolResult(call.name, self._run(call)) for call in calls)
        if self._reward_of is not None:
            self.reward = float(self._reward_of())
        return self, ""

    def _run(self, call: Any) -> str:
        self.calls += 1
        if call.error is not None:
            self.failures += 1
            return valid_unicode(str({"error": call.error}))
        tool = self._by_name.get(call.name)
        try:
            if tool is None:
                raise ValueError(f"Tool {call.name} not found.")
            result = tool(**coerce_arguments(_valid_arguments(call.arguments), self._schemas[call.name]))
        except Exception as error:  # TRL answers a failing tool with its error, and the episode goes on
            self.failures += 1
            return valid_unicode(str({"error": str(error)}))
        return valid_unicode(str(result))  # the result is tokenized next: a lone surrogate would stop the rollout

    def metrics(self) -> dict[str, float]:
        """Tool calls and failed calls (raised, unknown or malformed), and ``success`` if the class sets one.

        ``success`` is the instance's ``success`` attribute (not a method) when it has one, as 1.0 or 0.0.

        Example:
            >>> from examples.tool_calculator import Calculator
            >>> env, _ = TRLEnvironment(Calculator).reset("")
            >>> env, _ = env.step('<tool_call>{"name": "divide", "arguments": {}}</tool_call>')
            >>> env.tool_results[0].content, env.metrics()
            ("{'error': 'Tool divide not found.'}", {'tool_calls': 1.0, 'tool_failures': 1.0, 'success': 0.0})
        """
        figures = {"tool_calls": float(self.calls), "tool_failures": float(self.failures)}
        success = getattr(self.inner, "success", None)
        if success is not None and not callable(success):
            figures["success"] = float(bool(success))
        return figures


def trl_environment(
    environment: Callable[[], Any] | str, *, max_tool_calling_iterations: int | None = None
) -> Callable[[], TRLEnvironment]:
    """A picklable env factory for a TRL ``environment_factory`` class (or a ``"module:Class"`` string).

    Example:
        >>> factory = trl_environment("examples.tool_calculator:Calculator")
        >>> type(factory().inner).__name__
        'Calculator'
    """
    environment_class = resolve(environment, "trl_environment(environment=...)")
    return functools.partial(TRLEnvironment, environment_class, max_tool_calling_iterations=max_tool_calling_iterations)
