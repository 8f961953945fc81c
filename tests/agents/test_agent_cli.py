"""The command line takes an agent as an env: ``--env trl_env.agents:agent_env --env-kwargs '{"agent": ...}'``."""

from __future__ import annotations

import json

from trl_env.cli import main

AGENT = json.dumps({"agent": "examples.agent_calculator:solve", "max_turns": 4})


def test_check_env_passes_on_the_openai_sdk_calculator_agent(capsys):
    status = main(["check-env", "trl_env.agents:agent_env", "--env-kwargs", AGENT, "--seeds", "What is 6 * 7 + 1?"])
    out = capsys.readouterr().out
    assert status == 0 and "check-env AgentEnv: all 14 checks passed" in out, out
