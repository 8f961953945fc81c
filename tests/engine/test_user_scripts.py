"""Env workers never run the user's script: scripts written as users write them, run as subprocesses.

Each script imports torch, transformers and trl at the top (as TRL's own examples do) and appends its pid to a
file when it is imported, so a worker that re-imported it would show up as a second line. The env lives in a
module of its own next to the script, as the README says.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

ENV_MODULE = """
    import os

    class PidEcho:
        \"\"\"Answers with the pid of the process it runs in, for three turns.\"\"\"

        def reset(self, seed):
            self.reward, self.alive, self.turn = 0.0, True, 0
            return self, f"pid {os.getpid()}"

        def step(self, action):
            self.turn += 1
            self.reward += 1.0
            self.alive = self.turn < 3
            return self, f"pid {os.getpid()}"
"""

SCRIPT_TOP = """
    import os
    import re

    import torch  # noqa: F401  (a training script's imports, paid once per process that imports the script)
    import transformers  # noqa: F401
    import trl  # noqa: F401

    with open(os.environ["IMPORT_LOG"], "a") as log:
        log.write(f"{os.getpid()}\\n")

    from trl_env import ChatTemplateProcessor, rollout
    from trl_env.testing import InstantGenerator, build_qwen3_tokenizer
"""

PLAY = """
    tokenizer = build_qwen3_tokenizer(os.environ["TOKENIZER_CACHE"])
    generator = InstantGenerator(range(100, 3000), stop_id=tokenizer.convert_tokens_to_ids("<|im_end|>"), stop_prob=0.3)
    episodes = rollout(FACTORY, [str(i) for i in range(8)], generator, ChatTemplateProcessor(tokenizer), env_workers=3,
                       max_turns=4, max_turn_tokens=6, max_completion_tokens=400, **SETTINGS)
    seen = "".join(e.prompt_text + "".join(turn.observation for turn in e.turns) for e in episodes)
    env_pids = set(re.findall(r"pid (\\d+)", seen))
    print("failed", sum(e.failed for e in episodes), "errors", [e.error for e in episodes if e.failed][:1])
    print("own pid used by env", str(os.getpid()) in env_pids, "env pids", len(env_pids))
"""


def _write_user_project(tmp_path: Path, *, guarded: bool, factory: str = "PidEcho", settings: str = "{}") -> Path:
    (tmp_path / "pid_env.py").write_text(textwrap.dedent(ENV_MODULE))
    imports = "from pid_env import PidEcho\n" if factory == "PidEcho" else ""
    play = textwrap.dedent(PLAY).replace("FACTORY", factory).replace("**SETTINGS", f"**{settings}")
    if guarded:
        play = "def main():\n" + textwrap.indent(play, "    ") + '\n\nif __name__ == "__main__":\n    main()\n'
    script = textwrap.dedent(SCRIPT_TOP) + imports + LOCAL_ENV_IF_NEEDED.get(factory, "") + play
    (tmp_path / "train.py").write_text(script)
    return tmp_path / "train.py"


LOCAL_ENV_IF_NEEDED = {"LocalEcho": textwrap.dedent(ENV_MODULE).replace("PidEcho", "LocalEcho")}


def _run(script: Path, *args: str, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, list[str]]:
    log = script.parent / "imports.log"
    log.write_text("")
    env = {
        **os.environ,
        "IMPORT_LOG": str(log),
        "TOKENIZER_CACHE": str(Path(os.environ.get("TRL_ENV_TEST_CACHE", ROOT / ".cache")) / "qwen3-tokenizer"),
        "PYTHONPATH": str(ROOT / "src"),
    }
    result = subprocess.run(
        [sys.executable, *args], cwd=cwd or script.parent, env=env, capture_output=True, text=True, timeout=600
    )
    return result, log.read_text().split()


@pytest.mark.parametrize("guarded", [False, True], ids=["unguarded", "guarded"])
def test_process_workers_never_import_the_script(tmp_path, qwen3_tokenizer, guarded):
    script = _write_user_project(tmp_path, guarded=guarded)
    result, importers = _run(script, str(script))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failed 0 errors []" in result.stdout, result.stdout + result.stderr[-3000:]
    # the envs ran in other processes (process isolation, the default for a factory in a module) ...
    assert "own pid used by env False" in result.stdout, result.stdout
    # ... none of which imported the script: only the script's own process did
    assert len(importers) == 1, f"the script was imported by {len(importers)} processes"


def test_a_script_run_as_a_module_is_not_imported_by_workers(tmp_path, qwen3_tokenizer):
    package = tmp_path / "project"
    package.mkdir()
    (package / "__init__.py").write_text("")
    script = _write_user_project(package, guarded=False)
    script.write_text(script.read_text().replace("from pid_env import", "from project.pid_env import"))
    result, importers = _run(script, "-m", "project.train", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failed 0 errors []" in result.stdout and "own pid used by env False" in result.stdout, result.stdout
    assert len(importers) == 1, importers


def test_a_factory_defined_in_the_script_runs_in_threads_with_a_warning(tmp_path, qwen3_tokenizer):
    script = _write_user_project(tmp_path, guarded=False, factory="LocalEcho")
    result, importers = _run(script, str(script))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "failed 0 errors []" in result.stdout and "own pid used by env True" in result.stdout, result.stdout
    assert "LocalEcho is defined in the script being run" in result.stderr
    assert "so its envs run in threads" in result.stderr
    assert re.search(r"train\.py:\d+: UserWarning: the env factory LocalEcho", result.stderr)  # names the user's line
    assert len(importers) == 1


def test_process_isolation_for_a_factory_in_the_script_is_refused_before_any_episode(tmp_path, qwen3_tokenizer):
    script = _write_user_project(tmp_path, guarded=True, factory="LocalEcho", settings='{"env_isolation": "process"}')
    result, _ = _run(script, str(script))
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(
        "trl_env.errors.ConfigTypeError: env_factory LocalEcho cannot go to a worker process: LocalEcho is defined"
    )
    assert "in a module of its own" in last_line and "failed" not in result.stdout
