"""The command line takes an agent: ``--agent MODULE:FUNC``, or ``--env trl_env.agents:agent_env --env-kwargs ...``."""

from __future__ import annotations

import json

from trl_env.cli import main

AGENT = json.dumps({"agent": "examples.agent_calculator:solve", "max_turns": 4})


def test_check_env_passes_on_the_openai_sdk_calculator_agent(capsys):
    status = main(["check-env", "trl_env.agents:agent_env", "--env-kwargs", AGENT, "--seeds", "What is 6 * 7 + 1?"])
    out = capsys.readouterr().out
    assert status == 0 and "check-env AgentEnv: all 14 checks passed" in out, out


def test_train_takes_an_agent_program(tiny_model_dir, tmp_path, capsys):
    """``trl-env train --agent MODULE:FUNC``: one GRPO step of the openai-SDK calculator agent."""
    status = main(
        ["train", "--agent", "examples.agent_calculator:solve", "--env-kwargs", '{"max_turns": 2}',
         "--model", str(tiny_model_dir), "--steps", "1", "--num-generations", "2", "--prompts-per-step", "1",
         "--max-turns", "2", "--max-turn-tokens", "8", "--max-completion-tokens", "512",
         "--seeds", "What is 6 * 7 + 1?", "--output-dir", str(tmp_path), "--transcripts-every", "1"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert status == 0 and out.splitlines()[-1].startswith("trained 1 steps"), out[-2000:]
    records = [json.loads(line) for line in (tmp_path / "transcripts.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all("6 * 7 + 1" in json.dumps(record) for record in records)


def test_an_agent_that_cannot_be_imported_is_a_usage_error(capsys):
    status = main(["eval", "--agent", "examples.agent_calculator:nope", "--model", "/nowhere"])
    assert status == 2 and "cannot import the agent 'examples.agent_calculator:nope'" in capsys.readouterr().err
