"""Run untrusted Python snippets in a resource-limited subprocess.

What is enforced, per run:

* a fresh ``sys.executable -I`` process (isolated mode: no ``PYTHON*`` variables, no user
  site-packages) in its own session / process group, in an empty temporary working directory,
  with a near-empty environment (no ``PATH``; proxies pointed at a dead local port) and
  ``stdin`` from ``/dev/null``;
* ``setrlimit`` in ``preexec_fn``: ``RLIMIT_CPU`` (CPU seconds; the process dies of ``SIGXCPU``),
  ``RLIMIT_AS`` (address space; allocations raise ``MemoryError``), ``RLIMIT_FSIZE`` (caps
  stdout/stderr and any file the code writes) and ``RLIMIT_CORE = 0``;
* a wall-clock limit, after which the whole process group is killed with ``SIGKILL``.

Network isolation is **best effort**. If ``unshare --net`` works on this machine (root, or
unprivileged user namespaces enabled) the code runs in an empty network namespace. Otherwise
only the in-process guard applies: ``socket.socket`` refuses non-Unix sockets and
``socket.getaddrinfo`` / ``socket.create_connection`` raise, which code can get around (e.g.
via ``_socket`` or a subprocess). Likewise a process that calls ``setsid`` escapes the
group kill. This keeps honest mistakes (infinite loops, memory bombs, huge output) from
hurting the trainer; it is not a security boundary against adversarial code.
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

OUTPUT_FILE_LIMIT = 8 * 2**20  # RLIMIT_FSIZE: bytes any one file (stdout, stderr, ...) may reach
_DEAD_PROXY = "http://127.0.0.1:9"
_CHILD_ENV = {
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    **{k: "1" for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")},
    **{k: _DEAD_PROXY for k in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")},
}

# Runs in the child before the user's code: a socket guard, then exec of main.py with the
# sandbox's own frames stripped from tracebacks (so line numbers match the snippet).
_BOOTSTRAP = """\
import sys
def _run(path):
    import socket, traceback
    def _refuse(*args, **kwargs):
        raise OSError("network access is disabled in this sandbox")
    class _GuardedSocket(socket.socket):
        def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
            if fileno is None and family != getattr(socket, "AF_UNIX", None):
                _refuse()
            super().__init__(family, type, proto, fileno)
    socket.socket = _GuardedSocket
    socket.getaddrinfo = socket.create_connection = _refuse
    with open(path, encoding="utf-8", errors="replace") as f:
        source = f.read()
    sys.argv = [path]
    try:
        exec(compile(source, path, "exec"), {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next
        traceback.print_exception(type(exc), exc, tb)
        sys.exit(1)
_run(sys.argv[1])
"""


@dataclass(frozen=True)
class SandboxResult:
    """Outcome of :func:`run_python`.

    ``exit_code`` is the process's return code (negative: killed by that signal; ``-1`` if it
    could not be started). ``timed_out`` is True when the CPU or wall-clock limit ended the
    run. ``killed_reason`` is None for a normal exit (even a non-zero one), else one of
    ``"cpu_limit"``, ``"wall_limit"``, ``"memory_limit"``, ``"output_limit"``,
    ``"signal:<NAME>"`` or ``"spawn_error"``. ``stdout``/``stderr`` are already truncated.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    killed_reason: str | None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.killed_reason is None


def truncate_text(text: str, limit: int) -> str:
    """Keep at most about ``limit`` characters: the head and the tail, with a marker between.

    Example:
        >>> truncate_text("abcdefghij", 4)
        'ab\\n... [6 characters truncated] ...\\nij'
        >>> truncate_text("short", 10)
        'short'
    """
    if len(text) <= limit:
        return text
    head, tail = limit // 2, limit - limit // 2
    return f"{text[:head]}\n... [{len(text) - limit} characters truncated] ...\n{text[len(text) - tail :]}"


@functools.cache
def _unshare_prefix() -> tuple[str, ...]:
    """The ``unshare`` command line that gives a child an empty network namespace, or ``()``."""
    exe = shutil.which("unshare") or next((p for p in ("/usr/bin/unshare", "/bin/unshare") if os.path.exists(p)), None)
    if exe is None:
        return ()
    for prefix in ((exe, "--net"), (exe, "--net", "--map-root-user")):
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=5, check=False)
        except (OSError, subprocess.SubprocessError):
            continue
        if probe.returncode == 0:
            return prefix
    return ()


def network_isolated() -> bool:
    """Whether runs get an empty network namespace (True) or only the in-process guard."""
    return bool(_unshare_prefix())


def _limits(cpu_seconds: int, memory_mb: int):
    def apply() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
        resource.setrlimit(resource.RLIMIT_AS, (memory_mb * 2**20, memory_mb * 2**20))
        resource.setrlimit(resource.RLIMIT_FSIZE, (OUTPUT_FILE_LIMIT, OUTPUT_FILE_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError:
        return ""


def run_python(
    code: str,
    *,
    cpu_seconds: int = 2,
    memory_mb: int = 256,
    wall_seconds: float = 5,
    max_output_chars: int = 2000,
) -> SandboxResult:
    """Run ``code`` as a Python script under the limits above and return what happened.

    Never raises because of what ``code`` does: errors, crashes and limits all come back as a
    :class:`SandboxResult`. ``stdout`` and ``stderr`` are each cut to ``max_output_chars``
    (head and tail kept, see :func:`truncate_text`).

    Example:
        >>> run_python("print(6 * 7)").stdout
        '42\\n'
        >>> run_python("1 / 0").stderr.strip().splitlines()[-1]
        'ZeroDivisionError: division by zero'
    """
    with tempfile.TemporaryDirectory(prefix="trl-env-sandbox-") as tmp:
        root = Path(tmp)
        work = root / "work"
        work.mkdir()
        script = work / "main.py"
        script.write_text(code, encoding="utf-8")
        out_path, err_path = root / "stdout", root / "stderr"
        argv = [*_unshare_prefix(), sys.executable, "-I", "-c", _BOOTSTRAP, script.name]  # relative: stable tracebacks
        try:
            with open(out_path, "wb") as out, open(err_path, "wb") as err:
                proc = subprocess.Popen(
                    argv,
                    cwd=work,
                    env={**_CHILD_ENV, "HOME": str(work), "TMPDIR": str(work)},
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                    preexec_fn=_limits(cpu_seconds, memory_mb),  # setrlimit in the child
                )
        except (OSError, subprocess.SubprocessError) as exc:
            return SandboxResult("", f"sandbox: could not start Python: {exc}", -1, False, "spawn_error")
        finished = _wait_unreaped(proc.pid, wall_seconds)
        _kill_group(proc.pid)  # leader not yet reaped, so the group id cannot have been reused
        exit_code = proc.wait()
        raw_err = _read(err_path)
        reason = _killed_reason(exit_code, not finished, raw_err)
        stdout, stderr = truncate_text(_read(out_path), max_output_chars), truncate_text(raw_err, max_output_chars)
        return SandboxResult(stdout, stderr, exit_code, reason in ("cpu_limit", "wall_limit"), reason)


def _wait_unreaped(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` s for ``pid`` to exit, leaving it a zombie; True if it exited."""
    deadline, delay = time.monotonic() + timeout, 0.001
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # already reaped elsewhere
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(2 * delay, 0.02)


def _kill_group(pgid: int) -> None:
    """SIGKILL the snippet's process group (the child and anything it started)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _killed_reason(exit_code: int, wall_timeout: bool, stderr: str) -> str | None:
    if wall_timeout:
        return "wall_limit"
    if exit_code in (-signal.SIGXCPU, -signal.SIGKILL):  # soft, then hard RLIMIT_CPU (SIGKILL: if SIGXCPU was caught)
        return "cpu_limit"
    last_line = stderr.rstrip().rsplit("\n", 1)[-1]
    if last_line.startswith("MemoryError") or "Cannot allocate memory" in stderr:
        return "memory_limit"
    if "File too large" in stderr:
        return "output_limit"
    if exit_code < 0:
        return f"signal:{signal.Signals(-exit_code).name}" if -exit_code in signal.valid_signals() else "signal"
    return None
