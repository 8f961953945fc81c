"""The tool-calling example trains: ``examples/tool_calculator`` through ``make_rollout_func`` and GRPOTrainer.

The tiny model is scripted (:mod:`trl_env.testing.scripted_model`) to answer every turn with the three
calls that solve ``What is 6 * 7 + 1?`` (compact JSON, to keep the test short); its forward passes,
logprobs and gradients stay its own. Each episode runs three turns, the calls run at each: the first
``answer`` is ``Correct.`` or ``Wrong.`` (as the question asks), the later ones raise (a tool error).
"""

from __future__ import annotations

from examples.tool_calculator import Calculator
from tests.grpo_helpers import make_trainer
from trl_env import make_rollout_func
from trl_env.adapters.trl_environment import trl_environment
from trl_env.testing import build_tiny_qwen3_model
from trl_env.testing.scripted_model import script_model
from trl_env.trainer.transcripts import read_records
from trl_env.viewer.page import write_page

CALLS = [("multiply", '"a":6,"b":7'), ("add", '"a":42,"b":1'), ("answer", '"value":43')]
SCRIPT = "\n".join(f'<tool_call>{{"name":"{n}","arguments":{{{a}}}}}</tool_call>' for n, a in CALLS)
SOLVED, UNSOLVED = "What is 6 * 7 + 1?", "What is 2 * 3 + 4?"  # the script answers 43


def tool_chunk(*results: str) -> str:
    """Qwen3's template text after a turn that called tools: its tool messages and the generation prompt."""
    responses = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in results)
    return f"\n<|im_start|>user\n{responses}<|im_end|>\n<|im_start|>assistant\n"


def test_the_calculator_trains_with_a_model_that_calls_its_tools(qwen3_tokenizer, tmp_path):
    model = script_model(build_tiny_qwen3_model(qwen3_tokenizer), qwen3_tokenizer, SCRIPT)
    turn_tokens = len(qwen3_tokenizer.encode(SCRIPT)) + 1  # and <|im_end|>
    rollout_func = make_rollout_func(
        trl_environment(Calculator), max_turns=3, max_turn_tokens=turn_tokens + 8, transcripts_every=1,
        transcripts_per_step=None, env_isolation="thread",  # worker processes: tests/tools/test_tool_rollout.py
    )  # fmt: skip
    trainer = make_trainer(
        model, qwen3_tokenizer, rollout_func, tmp_path, steps=2, prompts=[SOLVED, UNSOLVED] * 4,
        per_device_train_batch_size=2, num_generations=2, max_completion_length=300,
    )  # fmt: skip
    trainer.train()
    assert trainer.state.global_step == 2

    records = read_records(tmp_path / "transcripts.jsonl")
    assert sorted({r["step"] for r in records}) == [0, 1] and len(records) == 4
    for record in records:
        assert record["error"] is None and record["num_turns"] == 3 and record["parse_failures"] == 0
        question = record["seed"]
        assert question in (SOLVED, UNSOLVED)
        tools = [s for s in record["segments"] if s["source"] == "tool"]
        assert [s["text"] for s in tools] == [
            tool_chunk("42", "43", "Correct." if question == SOLVED else "Wrong."),
            tool_chunk("42", "43", "{'error': 'the answer was already given'}"),
        ]
        assert all(mask == 0 for s in tools for mask in record["env_mask"][s["start"] : s["end"]])
        assert record["reward"] == (1.0 if question == SOLVED else 0.0)  # Calculator.get_reward()
        assert record["metrics"] == {"tool_calls": 9.0, "tool_failures": 2.0, "success": float(question == SOLVED)}
        assert record["success"] is (question == SOLVED)  # the viewer's success column
    write_page(records, tmp_path / "episodes.html")  # trl-env view shows tool chunks as env text

    logs = [log for log in trainer.state.log_history if "reward" in log]
    assert len(logs) == 2
    for step, log in enumerate(logs):
        episodes = [r for r in records if r["step"] == step]
        assert log["reward"] == sum(r["reward"] for r in episodes) / len(episodes)
        assert log["env/turns_mean"] == 3.0 and log["env/parse_failure_rate"] == 0.0
        assert log["completions/mean_length"] == 3 * turn_tokens  # TRL counts the model's tokens, not the tools'
