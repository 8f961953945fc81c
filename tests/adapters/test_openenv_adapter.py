"""OpenEnv adapter against a real OpenEnv server (uvicorn subprocess on 127.0.0.1): episodes, rendering,
rewards, server errors, the server dying mid-episode, many concurrent sessions, check_env and a rollout."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from adapter_helpers import assert_episodes_ok, round_trip

from trl_env.adapters.openenv import OpenEnvEnv, OpenEnvError, openenv_env
from trl_env.checks.env import check_env

SERVER = Path(__file__).with_name("openenv_server.py")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server() -> tuple[subprocess.Popen, str]:
    """Start the test server and wait until /health answers (at most 30 s)."""
    port = free_port()
    # its log goes to a file: a pipe nobody reads would fill up and block the server
    log = tempfile.NamedTemporaryFile(prefix="openenv-server-", suffix=".log", delete=False)  # noqa: SIM115
    process = subprocess.Popen([sys.executable, str(SERVER), str(port)], stdout=log, stderr=subprocess.STDOUT)
    log.close()
    process.log_path = log.name  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the test server exited: {Path(log.name).read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=1) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the test server did not answer /health within 30 s")


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    Path(process.log_path).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def server_url():
    process, url = start_server()
    yield url
    stop_server(process)


@pytest.fixture
def own_server():
    """A server for one test, which the test may kill."""
    process, url = start_server()
    yield process, url
    stop_server(process)


def shout(text: str) -> dict:
    """An action builder: the text, stripped, as the message."""
    return {"message": text.strip()}


def attempts_line(observation: dict) -> str:
    """A renderer: both fields of the observation."""
    return f"{observation['text']} (attempt {observation['attempts']})"


def test_an_episode_through_the_server(server_url):
    env, delta = openenv_env(server_url)().reset("train-7")  # digit 7
    assert delta == "Guess my digit (episode train-7)." and env.alive and env.reward == 0.0
    env, delta = env.step("3")
    assert (delta, env.reward, env.alive) == ("No, not '3'.", 0.0, True)
    env, delta = env.step("7")
    assert (delta, env.reward, env.alive) == ("Right!", 1.0, False)
    assert env._client is None  # the session was closed when the episode ended
    assert env.metrics() == {"steps": 2.0, "last_reward": 1.0, "success": 1.0}  # the server's own verdict
    env, delta = env.reset("train-2")  # a new session for the next episode
    assert delta.endswith("(episode train-2).") and env.alive
    env.close()


def test_reward_modes(server_url):
    for mode, expected in (("sum", 1.25), ("last", 1.0)):
        env, _ = openenv_env(server_url, reward_mode=mode)().reset("4")
        env, _ = env.step("5")  # off by one: 0.25
        env, _ = env.step("4")
        assert env.reward == expected, mode


def test_rendering_and_action_builders(server_url):
    env, delta = openenv_env(server_url, render=attempts_line, action=shout)().reset("1")
    assert delta == "Guess my digit (episode 1). (attempt 0)"
    env, delta = env.step("  1\n")
    assert delta == "Right! (attempt 1)" and env.reward == 1.0
    spec = "test_openenv_adapter:attempts_line"  # the CLI's way: a "module:function" string
    env, delta = round_trip(openenv_env(server_url, render=spec, action="test_openenv_adapter:shout"))().reset("1")
    assert delta == "Guess my digit (episode 1). (attempt 0)"
    env.close()
    env, delta = openenv_env(server_url, render="attempts")().reset("1")
    assert delta == "0"
    env.close()
    with pytest.raises(OpenEnvError, match=r"no field 'score' \(fields: \['attempts', 'success', 'text'\]\)"):
        openenv_env(server_url, render="score")().reset("1")


def test_success_is_the_servers_verdict_never_the_reward(server_url):
    env, _ = openenv_env(server_url)().reset("4")
    for guess in "5555":  # off by one four times: reward 1.0 in all, the digit never guessed
        env, _ = env.step(guess)
    assert env.reward == 1.0 and not env.alive and env.metrics()["success"] == 0.0
    env, _ = openenv_env(server_url, success_field="solved")().reset("4")
    env, _ = env.step("4")
    assert env.reward == 1.0 and "success" not in env.metrics()  # no such field: no success metric


ODD_ACTIONS = {
    "NUL": ("go\x00 north", "go north"),
    "escape codes": ("\x1b[1mhello\x07", "[1mhello"),
    "lone surrogate": ("hi \ud800", "hi \N{REPLACEMENT CHARACTER}"),
    "surrogate pair": ("\ud83d\ude00", "\N{GRINNING FACE}"),
    "very long": ("x" * 200_000, "x" * 200_000),
}


@pytest.mark.parametrize(("action", "received"), ODD_ACTIONS.values(), ids=ODD_ACTIONS.keys())
def test_odd_actions_reach_the_server_as_valid_text(server_url, action, received):
    env, _ = openenv_env(server_url)().reset("echo-1")  # the server answers "You said: <message>"
    env, delta = env.step(action)
    assert delta == f"You said: {received}" and env.alive
    delta.encode("utf-8")  # the next turn tokenizes it: a lone surrogate there would stop the rollout
    env.close()


def test_a_server_error_raises_a_clear_exception(server_url):
    env, _ = openenv_env(server_url, action_key="guess")().reset("1")
    with pytest.raises(OpenEnvError, match=r"step 1 \(seed='1'\) failed: RuntimeError: Server error: Invalid message"):
        env.step("1")  # the server's action model has no field "guess"
    assert not env.alive


def test_the_server_dying_mid_episode(own_server):
    process, url = own_server
    env, _ = openenv_env(url, message_timeout_s=5)().reset("s-3")
    env, _ = env.step("0")
    process.kill()
    process.wait()
    with pytest.raises(OpenEnvError, match=rf"OpenEnv server {url}: step 2 \(seed='s-3'\) failed"):
        env.step("3")
    assert not env.alive and env._client is None
    with pytest.raises(OpenEnvError, match="reset"):
        env.reset("s-3")


def test_a_server_dying_in_a_rollout_fails_that_episode(own_server, tiny_rollout):
    process, url = own_server
    episodes = tiny_rollout(openenv_env(url, message_timeout_s=5), ["crash-1"], max_turns=4)
    assert process.wait(timeout=10) == 1  # the server exited at the episode's second step
    assert episodes[0].error is not None and "OpenEnvError" in episodes[0].error and "step 2" in episodes[0].error


def test_sixteen_concurrent_sessions(server_url):
    factory = openenv_env(server_url)

    def play(i: int) -> tuple[str, float]:
        env, delta = factory().reset(f"train-{i}")
        for guess in range(10):
            env, _ = env.step(str((i + guess) % 10))  # right at the first guess
            if not env.alive:
                break
        return delta, env.reward

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(play, range(32)))
    assert results == [(f"Guess my digit (episode train-{i}).", 1.0) for i in range(32)]


def test_bad_options_fail_clearly():
    with pytest.raises(ValueError, match="base_url must start with"):
        openenv_env("127.0.0.1:1")
    with pytest.raises(ValueError, match="reward_mode must be 'sum' or 'last'"):
        openenv_env("http://127.0.0.1:1", reward_mode="max")
    with pytest.raises(ValueError, match="has no attribute 'nope'"):
        openenv_env("http://127.0.0.1:1", render="json:nope")


def test_check_env_passes(server_url):
    report = check_env(round_trip(openenv_env(server_url)))
    assert report.ok, report.table()


def test_rollout_with_the_tiny_model_sixteen_at_once(server_url, tiny_rollout):
    seeds = [f"train-{i}" for i in range(16)]
    episodes = tiny_rollout(openenv_env(server_url), seeds, env_workers=16)
    assert_episodes_ok(episodes, seeds, 0.0, 1.75)  # at most three 0.25s and a 1.0
    assert isinstance(OpenEnvEnv, type)


def test_trains_a_step_from_the_command_line(train_one_step, server_url):
    train_one_step("trl_env.adapters.openenv:openenv_env", json.dumps({"base_url": server_url}))
