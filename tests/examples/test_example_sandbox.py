"""run_python: results for normal runs, errors, CPU / wall / memory / output limits, no network."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from examples.discrete_log import sandbox
from examples.discrete_log.sandbox import run_python, truncate_text


def test_normal_run():
    result = run_python("import sys\nprint('hi')\nprint('warn', file=sys.stderr)")
    assert (result.stdout, result.stderr, result.exit_code) == ("hi\n", "warn\n", 0)
    assert result.ok and not result.timed_out and result.killed_reason is None


def test_user_errors_are_results_not_exceptions():
    result = run_python("x = 1\nraise KeyError('boom')")
    assert result.exit_code == 1 and result.killed_reason is None and not result.ok
    assert 'File "main.py", line 2, in <module>' in result.stderr  # stable path, own frames stripped
    assert result.stderr.rstrip().endswith("KeyError: 'boom'") and "<string>" not in result.stderr
    result = run_python("def f(:\n    pass")
    assert result.exit_code == 1 and "SyntaxError" in result.stderr
    result = run_python("import sys; print('bye'); sys.exit(3)")
    assert (result.stdout, result.exit_code, result.killed_reason) == ("bye\n", 3, None)


def test_infinite_loop_is_killed_by_the_cpu_limit():
    start = time.monotonic()
    result = run_python("while True: pass", cpu_seconds=1, wall_seconds=20)
    assert time.monotonic() - start < 8
    assert result.timed_out and result.killed_reason == "cpu_limit" and result.exit_code < 0


def test_sleeping_code_is_killed_by_the_wall_limit():
    start = time.monotonic()
    result = run_python("import time\nprint('start', flush=True)\ntime.sleep(60)", wall_seconds=1)
    assert time.monotonic() - start < 4
    assert result.timed_out and result.killed_reason == "wall_limit" and result.stdout == "start\n"


def test_memory_bombs_hit_the_memory_limit():
    for bomb in ["x = bytearray(10**10)", "x = []\nwhile True:\n    x.append(bytearray(10**6))"]:
        start = time.monotonic()
        result = run_python(bomb, memory_mb=256, wall_seconds=20)
        assert time.monotonic() - start < 8
        assert result.killed_reason == "memory_limit" and result.exit_code != 0 and not result.timed_out
        assert "MemoryError" in result.stderr


def test_output_is_truncated():
    result = run_python("print('a' * 5000 + 'b' * 5000)", max_output_chars=500)
    assert len(result.stdout) < 600 and "characters truncated" in result.stdout
    assert result.stdout.startswith("a" * 250) and result.stdout.endswith("b" * 249 + "\n")
    flood = run_python("while True:\n    print('y' * 100_000)", wall_seconds=20)
    assert flood.killed_reason == "output_limit" and len(flood.stdout) <= 2100


def test_truncate_text():
    assert truncate_text("x" * 10, 10) == "x" * 10
    cut = truncate_text("0123456789" * 10, 20)
    assert cut.startswith("0123456789") and cut.endswith("0123456789") and "[80 characters truncated]" in cut


def test_network_is_refused():
    result = run_python("import socket\nsocket.create_connection(('127.0.0.1', 9), timeout=1)")
    assert result.exit_code == 1 and "network access is disabled" in result.stderr
    result = run_python("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)")
    assert result.exit_code == 1 and "network access is disabled" in result.stderr


def test_isolated_environment_and_working_directory():
    result = run_python(
        "import os, sys\nprint(sorted(os.listdir('.')))\nprint('PATH' in os.environ, sys.flags.isolated)"
    )
    assert result.stdout == "['main.py']\nFalse 1\n"


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (in a container nobody may reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_leftover_processes_are_killed():
    spawn = f"import subprocess\nprint(subprocess.Popen([{sys.executable!r}, '-c', 'import time; time.sleep(60)']).pid)"
    result = run_python(spawn)
    assert result.exit_code == 0
    pid, deadline = int(result.stdout), time.monotonic() + 5
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(pid)


def test_works_without_unshare(monkeypatch):
    monkeypatch.setattr(sandbox, "_unshare_prefix", lambda: ())
    assert not sandbox.network_isolated()
    assert run_python("print(1)").stdout == "1\n"
    result = run_python("import urllib.request\nurllib.request.urlopen('http://example.com', timeout=2)")
    assert result.exit_code == 1 and "network access is disabled" in result.stderr
