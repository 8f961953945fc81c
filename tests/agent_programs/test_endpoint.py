"""The episode endpoint over raw HTTP: routes, keys, a 400 naming the field, one request at a time, closing."""

from __future__ import annotations

import json
import queue
import threading
import urllib.error
import urllib.request

import pytest

from trl_env.agents.server import EpisodeServer

HI = [{"role": "user", "content": "Hi"}]


def post(server, body, key="k", path="/chat/completions"):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(server.base_url + path, data, {"Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


@pytest.fixture
def server():
    server = EpisodeServer(queue.Queue(), api_key="k")
    yield server
    server.close("test over")


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        (b"{not json", "body", "not JSON"),
        ([1, 2], "body", "expected a JSON object"),
        ({"messages": []}, "messages", "non-empty list"),
        ({"messages": [{"role": "narrator", "content": "x"}]}, "messages[0].role", "expected one of"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]", "text parts"),
        ({"messages": HI, "tools": [{"type": "code"}]}, "tools[0]", "'type': 'function'"),
        ({"messages": HI, "n": 3}, "n", "only n=1"),
        ({"messages": HI, "stream": True}, "stream", "not supported"),
        ({"messages": HI, "tool_choice": {"type": "function", "function": {"name": "f"}}}, "tool_choice", "only"),
        ({"messages": HI, "logprobs": True}, "logprobs", "not served"),
        ({"messages": HI, "response_format": {"type": "json_object"}}, "response_format", "only"),
        ({"messages": HI, "stop": 3}, "stop", "expected a string"),
    ],
)
def test_a_bad_request_is_a_400_naming_its_field(server, body, field, words):
    status, answer = post(server, body)
    assert status == 400 and answer["error"]["param"] == field and words in answer["error"]["message"], answer
    assert server.refused and server.events.empty()  # the env never sees it


def test_routes_and_keys(server):
    assert post(server, {"messages": HI}, key="other")[0] == 401
    assert post(server, {"messages": HI}, path="/completions")[0] == 404
    request = urllib.request.Request(server.base_url + "/models", headers={"Authorization": "Bearer k"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert json.load(response)["data"][0]["id"] == "trl-env"


def test_one_request_at_a_time_then_every_request_refused_once_closed(server):
    first: dict = {}
    waiting = threading.Thread(target=lambda: first.update(answer=post(server, {"messages": HI, "stop": ["x"]})))
    waiting.start()
    kind, pending = server.events.get(timeout=10)
    assert kind == "request" and pending.request.stop == ("x",)
    status, answer = post(server, {"messages": HI})
    assert status == 400 and "one request at a time" in answer["error"]["message"]
    server.refuse_all("the episode is over")
    waiting.join(10)
    assert first["answer"][0] == 400 and first["answer"][1]["error"]["type"] == "episode_over"
    assert post(server, {"messages": HI})[1]["error"]["message"] == "the episode is over"


def test_a_resent_conversation_is_reused_and_an_edit_is_still_caught():
    from trl_env.agents.history import HistoryError, added_messages
    from trl_env.agents.requests import read_request

    call = {"id": "c0", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    first = read_request({"messages": [*HI, {"role": "assistant", "content": None, "tool_calls": [call]}]})
    answer = {"role": "assistant", "content": "3"}
    body = {"messages": [*first.raw_messages, answer, {"role": "user", "content": "Sure?"}]}
    again = read_request(json.loads(json.dumps(body)), first)  # parsed anew, as the server does
    assert all(a is b for a, b in zip(again.messages[:2], first.messages, strict=True))  # not read again
    assert again.messages == read_request(body).messages  # the same as reading it whole
    assert added_messages([*first.messages, answer], again.messages) == [{"role": "user", "content": "Sure?"}]
    edited = json.loads(json.dumps(body))
    edited["messages"][0]["content"] = "Hello"
    rewritten = read_request(edited, first)
    assert rewritten.messages[0] == {"role": "user", "content": "Hello"}  # read again: it differs as sent
    with pytest.raises(HistoryError, match="message 0 differs at character 30"):
        added_messages([*first.messages, answer], rewritten.messages)
