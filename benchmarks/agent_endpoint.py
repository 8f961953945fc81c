"""The agent endpoint's cost: per-turn added latency against the same task as a plain Env, and 64 agents at once.

1. The calculator task two ways, same tokens: the openai-SDK agent of ``examples/agent_calculator`` behind
   ``agent_env`` (:class:`MultiplyAgent` loop), and :class:`MultiplyEnv`, a plain tool ``Env`` answering the same
   requests. A generator writes the same tool call at every turn, instantly, so the difference is trl-env's and
   the agent's own work. Per-turn cost is the slope between rollouts of 1 and ``--turns`` turns (process workers,
   one episode), which leaves out the pool's start; the completion tokens of both runs must be identical.
   The same loop posting its JSON with ``httpx`` (:func:`http_agent`) leaves out the openai SDK's own per-request
   work (it validates and copies the whole conversation at every request: at 101 turns, most of the cost):
   the difference between it and the plain Env is the endpoint's.
2. 64 episodes of the agent at once (64 endpoints, 64 agent threads, in 64 worker processes): errors (must be 0)
   and wall time, next to 64 episodes of the plain Env (the difference is mostly each worker importing openai).

Run: python benchmarks/agent_endpoint.py [--turns 101] [--agents 64] [--repeats 3]  (--agents 0: part 1 only)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from openai import OpenAI  # at the top: the pool's workers import it with this module, before any deadline

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: the repository root's examples/
from examples.agent_calculator.agent import TOOLS, run_tool  # noqa: E402

CALL = '<tool_call>{"name":"multiply","arguments":{"a":6,"b":7}}</tool_call>'
TASK = "What is 6 * 7 + 1? Use the tools, then call answer()."


def multiply_agent(endpoint: Any, task: str) -> float:
    """The openai-SDK loop: as many model calls as the task (a number) says, every tool call answered."""
    client = OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key, max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for _ in range(int(task)):
        message = client.chat.completions.create(model="policy", messages=messages, tools=TOOLS).choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        for call in message.tool_calls or []:
            result = run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return 0.0


def http_agent(endpoint: Any, task: str) -> float:
    """The same loop on bare HTTP (``httpx``, the openai SDK's transport): no SDK work per request."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    with httpx.Client(base_url=endpoint.base_url, headers=headers, timeout=60) as client:
        for _ in range(int(task)):
            body = {"model": "policy", "messages": messages, "tools": TOOLS}
            message = client.post("/chat/completions", json=body).raise_for_status().json()["choices"][0]["message"]
            messages.append({key: value for key, value in message.items() if value is not None})
            for call in message.get("tool_calls") or []:
                result = run_tool(call["function"]["name"], json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
    return 0.0


class MultiplyEnv:
    """The same episode as a plain tool Env: the same prompt and tools, each call answered, ``seed`` turns."""

    def __init__(self) -> None:
        self.reward, self.alive, self.tool_results, self.tools, self.turns = 0.0, True, (), TOOLS, 0

    def reset(self, seed: str) -> tuple[MultiplyEnv, str]:
        self.alive, self.turns, self.limit = True, 0, int(seed)
        return self, TASK

    def step(self, action: str) -> tuple[MultiplyEnv, str]:
        from trl_env.chat.tool_calls import parse_tool_calls
        from trl_env.core import ToolResult

        _, calls = parse_tool_calls(action)
        self.tool_results = tuple(ToolResult(c.name, run_tool(c.name, c.arguments)) for c in calls)
        self.turns += 1
        self.alive = self.turns < self.limit
        return self, ""


class ScriptGenerator:
    """Writes the same ids at every turn, instantly."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Any]:
        from trl_env.core import Generation

        return [Generation(list(self.ids), [0.0] * len(self.ids)) for _ in contexts]


def timed(factory: Any, seeds: list[str], generator: Any, processor: Any, turns: int) -> tuple[float, list[Any]]:
    from trl_env import rollout

    start = time.perf_counter()
    episodes = rollout(
        factory, seeds, generator, processor, max_turns=turns, max_turn_tokens=64, env_isolation="process",
        env_workers=len(seeds),
    )  # fmt: skip
    return time.perf_counter() - start, episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=101)
    parser.add_argument("--agents", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from benchmarks.agent_endpoint import MultiplyEnv as plain_env  # not __main__'s: workers import it
    from trl_env import ChatTemplateProcessor
    from trl_env.agents import agent_env
    from trl_env.testing import build_qwen3_tokenizer

    tokenizer = build_qwen3_tokenizer()
    processor = ChatTemplateProcessor(tokenizer)
    generator = ScriptGenerator(tokenizer.encode(CALL) + [tokenizer.convert_tokens_to_ids("<|im_end|>")])
    agent = agent_env("benchmarks.agent_endpoint:multiply_agent")
    http = agent_env("benchmarks.agent_endpoint:http_agent")

    per_turn, tokens = {}, {}
    for name, factory in (("plain Env", plain_env), ("agent_env, openai SDK", agent), ("agent_env, httpx", http)):
        slopes = []
        for _ in range(args.repeats):
            short, _ = timed(factory, ["1"], generator, processor, 1)
            long, episodes = timed(factory, [str(args.turns)], generator, processor, args.turns)
            assert episodes[0].error is None and episodes[0].num_turns == args.turns, episodes[0].error
            slopes.append((long - short) / (args.turns - 1))
            tokens[name] = episodes[0].prompt_ids + episodes[0].completion_ids
        per_turn[name] = statistics.median(slopes)
        print(f"{name}: {per_turn[name] * 1e3:.2f} ms per turn (median of {args.repeats})")
    for name in ("agent_env, openai SDK", "agent_env, httpx"):
        print(f"added ({name}): {(per_turn[name] - per_turn['plain Env']) * 1e3:.2f} ms per turn")
        print(f"tokens identical to the plain Env's ({name}): {tokens[name] == tokens['plain Env']}")
    if not args.agents:
        return

    plain_seconds, _ = timed(plain_env, ["4"] * args.agents, generator, processor, 4)
    seconds, episodes = timed(agent, ["4"] * args.agents, generator, processor, 4)
    errors = [e.error for e in episodes if e.error]
    print(
        f"{args.agents} concurrent agents x 4 turns: {seconds:.2f} s "
        f"({args.agents} plain Envs: {plain_seconds:.2f} s), {len(errors)} errors {errors[:1]}"
    )


if __name__ == "__main__":
    main()
