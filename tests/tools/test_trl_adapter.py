"""A class written for TRL's environment_factory runs unchanged: TRL's tool-call semantics, checks and CLI."""

from __future__ import annotations

import json
import subprocess
import sys

from examples.tool_calculator import Calculator
from trl_env.adapters.trl_environment import TRLEnvironment, trl_environment
from trl_env.chat.tool_calls import ToolCall, format_calls
from trl_env.checks.env import check_env
from trl_env.core import Env, ToolResult, UsesTools


def call(name: str, **arguments) -> ToolCall:
    return ToolCall(name, arguments)


def test_trl_class_runs_unchanged_with_trl_semantics():
    env, delta = TRLEnvironment(Calculator).reset("What is 6 * 7 + 1?")
    assert isinstance(env, Env) and isinstance(env, UsesTools)
    assert delta == "What is 6 * 7 + 1? Use the tools, then give the answer with answer()."
    # two calls in one turn run in order; arguments written as text (Qwen3.5's XML) are typed by the schema
    env, delta = env.step("Let me see.\n" + format_calls([call("multiply", a="6", b="7"), call("add", a=42, b=1)]))
    assert (delta, env.alive, env.reward) == ("", True, 0.0)
    assert env.tool_results == (ToolResult("multiply", "42"), ToolResult("add", "43"))
    # a raising tool, an unknown tool and a malformed call each answer TRL's error message
    env, _ = env.step(
        format_calls(
            [call("answer", value=43), call("answer", value=43), call("sqrt", x=4), ToolCall("unknown", error="bad")]
        )
    )
    assert [r.content for r in env.tool_results] == [
        "Correct.",
        "{'error': 'the answer was already given'}",
        "{'error': 'Tool sqrt not found.'}",
        "{'error': 'bad'}",
    ]
    assert env.reward == 1.0 and env.alive
    # a turn without tool calls ends the episode (TRL's loop stops there)
    env, _ = env.step("The answer is 43.")
    assert not env.alive and env.tool_results == ()
    assert env.metrics() == {"tool_calls": 6.0, "tool_failures": 3.0, "success": 1.0}  # Calculator.success


class Echo:
    """A TRL environment class whose tool repeats its argument, and no success attribute."""

    def reset(self, **kwargs) -> str:
        return ""

    def echo(self, text: str) -> str:
        """Repeat the text.

        Args:
            text: What to repeat.

        Returns:
            The same text.
        """
        assert isinstance(text, str)
        text.encode("utf-8")  # what a tool that writes a file, a log or an HTTP request does
        return f"You said {text}"


def test_tool_arguments_and_results_are_valid_unicode():
    # JSON lets the model write a lone surrogate as an escape: the tool got it, raised on encoding it, and a
    # result echoing it could not be tokenized (the engine's TypeError stopped the whole rollout)
    env, _ = TRLEnvironment(Echo).reset("Say something.")
    env, _ = env.step(
        '<tool_call>{"name": "echo", "arguments": {"text": "a\\ud800b \\ud83d\\ude00 \\u0000"}}</tool_call>'
    )
    assert env.tool_results == (ToolResult("echo", "You said a\N{REPLACEMENT CHARACTER}b \N{GRINNING FACE} \x00"),)
    assert env.failures == 0
    env, _ = env.step('<tool_call>{"name": "\\udc80", "arguments": {}}</tool_call>')  # unknown, named oddly
    content = env.tool_results[0].content
    assert content.endswith("not found.'}") and content.encode("utf-8")  # tokenizable
    assert "success" not in env.metrics()  # no success attribute: no success metric (the reward is not one)


def test_success_is_reported_from_the_class():
    env, _ = TRLEnvironment(Calculator).reset("What is 2 * 3 + 1?")
    assert env.metrics()["success"] == 0.0
    env, _ = env.step(format_calls([call("answer", value=7)]))
    assert env.metrics()["success"] == 1.0


def test_max_tool_calling_iterations_bounds_the_tool_turns():
    env, _ = trl_environment(Calculator, max_tool_calling_iterations=1)().reset("What is 2 * 3?")
    env, _ = env.step(format_calls([call("multiply", a=2, b=3)]))
    assert env.alive
    env, _ = env.step(format_calls([call("answer", value=6)]))  # past the bound: not run, as in TRL
    assert not env.alive and env.reward == 0.0


def test_check_env_passes_on_the_tool_example():
    report = check_env(trl_environment(Calculator), seeds=["What is 2 * 3 + 1?", "What is 4 * 5 + 2?"])
    assert report.ok, report.table()


def test_eval_cli_runs_the_tool_example_with_env_kwargs(tiny_model_dir, tmp_path):
    out = tmp_path / "episodes.jsonl"
    command = [
        sys.executable, "-m", "trl_env.cli", "eval", "--model", str(tiny_model_dir),
        "--env", "trl_env.adapters.trl_environment:trl_environment",
        "--env-kwargs", json.dumps({"environment": "examples.tool_calculator:Calculator"}),
        "--seeds", "What is 2 * 3 + 1?,What is 4 * 5 + 2?", "--max-turns", "2", "--max-turn-tokens", "8",
        "--out", str(out),
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all(record["success"] in (True, False) for record in records)
    assert "success rate         n/a" not in result.stdout and "success rate" in result.stdout  # Calculator.success
    assert all(
        "# Tools" in record["prompt_text"] and '"name": "multiply"' in record["prompt_text"] for record in records
    )
