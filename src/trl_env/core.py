"""Every protocol trl-env's rollout loop relies on, in one place.

Three protocols are required: an :class:`Env` (text in, text out, a reward), a :class:`Processor`
(renders env text into chat-formatted strings and parses the model's answer) that is also
:class:`TurnDelimited` (says how a model turn ends; a processor that is not is refused when the rollout
or the ``rollout_func`` is built, naming the members it lacks), and a :class:`Generator` (the sampling
backend: batched contexts in, sampled ids and logprobs out). Everything else is an *optional capability*:
a small runtime-checkable protocol the engine tests with ``isinstance`` (never ``getattr``) and uses:

========================  =====================================================================
protocol                  what the engine does with it
========================  =====================================================================
:class:`StrictParser`     a processor that flags malformed answers (otherwise an empty action
                          counts as a parse failure)
:class:`HasTokenizer`     a processor or generator carrying the tokenizer (``rollout()`` finds it)
:class:`ReportsMetrics`   an env whose ``metrics()`` are recorded when its episode ends
                          (``success`` among them is what :func:`~trl_env.evaluate` counts)
:class:`Closable`         an env whose ``close()`` is called when its episode ends
:class:`UsesTools`        an env whose actions are tool calls: its tools go into the prompt as the
                          chat template renders them, its results come back as ``tool`` messages
:class:`SetsSystemPrompt` an env whose episode has its own system prompt (read after ``reset``)
:class:`RewritesHistory`  an env that may rewrite its conversation: the next turn's prompt is then the
                          template's rendering of the new messages (per-turn histories, a new sample)
:class:`Forkable`         an env that makes its own independent copy for tree rollouts (otherwise
                          ``copy.deepcopy``, see :func:`trl_env.envpool.forking.fork_env`)
:class:`CollectiveGenerator`  a generator whose calls are collective across processes
:class:`ConcurrentGenerator`  a generator that takes requests without blocking (a server batching
                          continuously): the per-episode schedule sends each ready context at once
:class:`EpisodeMemory`    a generator keeping per-episode state (keys and values): told when an
                          episode ends, so it can drop it
========================  =====================================================================

Example:
    >>> class Echo:
    ...     reward, alive = 0.0, True
    ...     def reset(self, seed):
    ...         return self, f"Say {seed}."
    ...     def step(self, action):
    ...         self.reward, self.alive = float(action == "hi"), False
    ...         return self, "done"
    ...     def metrics(self):
    ...         return {"success": self.reward}
    >>> env, delta = Echo().reset("hi")
    >>> env, delta = env.step("hi")
    >>> env.reward, env.alive, isinstance(env, Env), isinstance(env, ReportsMetrics), isinstance(env, Closable)
    (1.0, False, True, True, False)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, NamedTuple, Protocol, runtime_checkable

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


@runtime_checkable
class TurnDelimited(Protocol):
    """How a processor's model turn ends (required of every processor the engine uses).

    ``turn_end`` is the special token that closes an assistant turn (``"<|im_end|>"``): the engine cuts a
    turn after it, or appends it. ``after_turn_end`` is what the template writes after it before the next
    user turn (Qwen's ``"\\n"``). Both are read once, into a :class:`~trl_env.chat.turn_end.TurnEnd`.
    """

    @property
    def turn_end(self) -> str: ...

    @property
    def after_turn_end(self) -> str: ...


# --- optional capabilities of a processor -------------------------------------------------------


class ParsedOutput(NamedTuple):
    """Reasoning, action, and whether the output was well formed."""

    reasoning: str
    action: str
    ok: bool


@runtime_checkable
class StrictParser(Protocol):
    """A processor that flags malformed answers (e.g. an unclosed thinking block)."""

    def parse(self, completion: Language) -> ParsedOutput: ...


@runtime_checkable
class HasTokenizer(Protocol):
    """An object (processor or generator) that carries the tokenizer it works with."""

    tokenizer: Any


# --- optional capabilities of an environment -----------------------------------------------------


@runtime_checkable
class ReportsMetrics(Protocol):
    """An env that reports per-episode figures when its episode ends (``{"success": 1.0, ...}``)."""

    def metrics(self) -> Mapping[str, float]: ...


@runtime_checkable
class Closable(Protocol):
    """An env holding a resource (process, socket, container) to release when its episode ends."""

    def close(self) -> None: ...


class ToolResult(NamedTuple):
    """The result of one tool call, rendered by the chat template as a ``tool``-role message.

    ``content`` is the message text (an error is reported as text too, as TRL does:
    ``"{'error': 'division by zero'}"``); ``name`` is the tool that was called.
    """

    name: str
    content: str


@runtime_checkable
class UsesTools(Protocol):
    """An env whose actions are tool calls, rendered by the model's own chat template.

    ``tools`` is read once after ``reset``: Python functions with type hints and a docstring, or
    JSON schemas, as ``tokenizer.apply_chat_template(tools=...)`` accepts. The prompt shows them
    exactly as the template does. ``step`` receives the model's tool calls as normalised
    ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` lines (read them back with
    :func:`trl_env.chat.tool_calls.parse_tool_calls`). ``tool_results`` is read after every
    ``step``: one :class:`ToolResult` per call of that turn, in call order, each rendered as a
    ``tool`` message; when it is empty the step's delta is an ordinary user message.

    Example:
        >>> class Adder:
        ...     reward, alive, tool_results = 0.0, True, ()
        ...     def add(self, a: int, b: int) -> int:
        ...         \"\"\"Add two integers.
        ...
        ...         Args:
        ...             a: the first.
        ...             b: the second.
        ...         \"\"\"
        ...         return a + b
        ...     @property
        ...     def tools(self):
        ...         return [self.add]
        ...     def reset(self, seed):
        ...         return self, "Add 2 and 3."
        ...     def step(self, action):
        ...         self.tool_results = [ToolResult("add", "5")]
        ...         return self, ""
        >>> isinstance(Adder(), UsesTools), isinstance(Adder(), Env)
        (True, True)
    """

    tools: Sequence[Any]
    tool_results: Sequence[ToolResult]


@runtime_checkable
class SetsSystemPrompt(Protocol):
    """An env that sets its episode's system prompt: ``system_prompt`` is read once after ``reset`` and replaces
    ``RolloutConfig.system_prompt`` for that episode (an agent's own system message, see :mod:`trl_env.agents`)."""

    system_prompt: str


class HistoryRewrite(NamedTuple):
    """A conversation an env rewrote: the whole new ``messages`` (chat-template form) and the ``reason``; ``tools``,
    when not None, the tool schemas declared from then on (an agent that changed its tools), else they stay."""

    messages: tuple[dict[str, Any], ...]
    reason: str
    tools: tuple[dict[str, Any], ...] | None = None


@runtime_checkable
class RewritesHistory(Protocol):
    """An env whose conversation can be rewritten (an agent that summarised its history): ``history_rewrite`` is read
    after every ``step``; when not None, the next model turn's prompt is the chat template's rendering of its
    messages instead of the conversation so far (``history="template"``/``"window"`` only, see docs/agents.md)."""

    history_rewrite: HistoryRewrite | None


@runtime_checkable
class Forkable(Protocol):
    """An env that copies itself for tree rollouts: ``fork()`` returns an independent env in the same state.

    Without it the pool copies an env with ``copy.deepcopy`` (thread isolation) or ``pickle`` (process
    isolation); give an env holding a process, socket or container a ``fork()`` that starts its own.
    The copy must share nothing mutable with the original: stepping one must not change the other.

    Example:
        >>> class Counter:
        ...     reward, alive = 0.0, True
        ...     def __init__(self, history=()):
        ...         self.history = list(history)
        ...     def reset(self, seed):
        ...         return self, seed
        ...     def step(self, action):
        ...         self.history.append(action)
        ...         return self, str(len(self.history))
        ...     def fork(self):
        ...         return Counter(self.history)
        >>> env = Counter(["a"])
        >>> isinstance(env, Forkable), env.fork().step("b")[1], env.history
        (True, '2', ['a'])
    """

    def fork(self) -> Env: ...


# --- the generation backend ----------------------------------------------------------------------


class Generation(NamedTuple):
    """One sampled continuation: token ids and the logprob of each sampled token.

    A plain ``(ids, logprobs)`` tuple is accepted wherever a ``Generation`` is.
    """

    ids: list[int]
    logprobs: list[float]


@runtime_checkable
class Generator(Protocol):
    """A batched sampler over token-id contexts.

    Each context gets its sampled ids and each one's logprob under the sampling distribution. Stop ids
    are given once, at construction (every trl-env generator takes ``stop_token_ids=``, e.g.
    :func:`trl_env.generation.local_model.stop_token_ids`); ``generate`` never receives them. Sampling a
    context stops at its first stop token (kept as its last id) or after ``max_new_tokens``; the engine
    cuts each result once, after the first end-of-turn token and at the turn's budget.

    Example:
        >>> class Constant:
        ...     def generate(self, contexts, max_new_tokens):
        ...         return [Generation([7] * max_new_tokens, [0.0] * max_new_tokens) for _ in contexts]
        >>> isinstance(Constant(), Generator), Constant().generate([[1, 2]], 2)[0].ids
        (True, [7, 7])
    """

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]: ...


@runtime_checkable
class CollectiveGenerator(Generator, Protocol):
    """A generator whose ``generate`` every process must call in step (TRL's vLLM server mode).

    ``collective`` says whether the rule applies now (False for a process running alone).
    ``any_rank_live(has_live)`` returns whether any process still has a live episode, so that a
    process whose episodes have all ended keeps calling ``generate([])`` until all are done.
    """

    collective: bool

    def any_rank_live(self, has_live: bool) -> bool: ...


@runtime_checkable
class ConcurrentGenerator(Generator, Protocol):
    """A generator that also takes requests without blocking; the server batches them continuously.

    ``submit`` returns at once with a future of what ``generate`` would return for the same arguments.

    Example:
        >>> from concurrent.futures import ThreadPoolExecutor
        >>> class Threaded:
        ...     pool = ThreadPoolExecutor(2)
        ...     def generate(self, contexts, max_new_tokens):
        ...         return [Generation([7] * max_new_tokens, [0.0] * max_new_tokens) for _ in contexts]
        ...     def submit(self, contexts, max_new_tokens):
        ...         return self.pool.submit(self.generate, contexts, max_new_tokens)
        >>> isinstance(Threaded(), ConcurrentGenerator), Threaded().submit([[1]], 2).result()[0].ids
        (True, [7, 7])
    """

    def submit(self, contexts: list[list[int]], max_new_tokens: int) -> Future[list[Generation]]: ...


@runtime_checkable
class EpisodeMemory(Protocol):
    """A generator that keeps state per episode between calls (e.g. its keys and values).

    The engine calls ``end_episode(context)`` with an episode's last context when the episode ends, so
    the state kept for it (and for any shorter context of it) can be dropped at once.
    """

    def end_episode(self, context: Sequence[int]) -> None: ...
