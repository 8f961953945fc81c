"""The README's example runs as written: here, and after a plain install in a fresh venv."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def readme_example() -> str:
    return re.search(r"## Example\n.*?```python\n(.*?)```", README.read_text(), re.S).group(1)


def test_readme_example_runs(tmp_path, monkeypatch, qwen3_tokenizer):
    block = readme_example()
    monkeypatch.chdir(tmp_path)
    # reuse the session's tokenizer cache instead of rebuilding it (same result, 10 s faster)
    import trl_env.testing as testing

    monkeypatch.setattr(testing, "build_qwen3_tokenizer", lambda *a, **k: qwen3_tokenizer)
    namespace: dict = {}
    exec(compile(block, "README.md", "exec"), namespace)
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 2
    assert any("env/turns_mean" in entry for entry in trainer.state.log_history)


def test_readme_example_runs_after_a_plain_install(tmp_path):
    """``pip install ".[testing]"`` into a fresh venv (torch pinned first, as the Makefile does), then the example."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, "torch==2.13.0"], check=True, timeout=900)
    subprocess.run([*pip, f"{ROOT}[testing]"], check=True, timeout=900)
    (tmp_path / "example.py").write_text(readme_example())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")} | {"HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [str(venv / "bin" / "python"), "example.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "outputs" / "readme").is_dir()


def test_rollout_defaults_the_readme_states_are_the_config_defaults():
    """Each "`field`, default X" the README writes for a ``RolloutConfig`` field is that field's default."""
    import dataclasses

    from trl_env.engine.config import RolloutConfig

    defaults = {f.name: f.default for f in dataclasses.fields(RolloutConfig)}
    stated = [(name, value) for name, value in re.findall(r"`(\w+)`, default ([\d.]+)", README.read_text())]
    stated = [(name, value) for name, value in stated if name in defaults]
    assert len(stated) >= 2, "the README no longer states the RolloutConfig defaults of make_rollout_func's settings"
    for name, value in stated:
        assert float(value) == defaults[name], f"README: `{name}`, default {value}; RolloutConfig: {defaults[name]}"
