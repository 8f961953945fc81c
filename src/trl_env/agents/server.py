"""One episode's OpenAI-compatible endpoint: an HTTP server on 127.0.0.1 that hands each chat request to its env.

Each episode has its own server (its own port: the route) and its own API key, so concurrent agents never mix;
a request with another key is refused (401). ``POST /v1/chat/completions`` is validated
(:func:`~trl_env.agents.requests.read_request`; a bad request is a 400 naming the field), put on the episode's
event queue as a :class:`PendingRequest`, and held open until the env answers it with the model's turn. One
request at a time: a second one while the first waits is refused. Once the episode is over (:meth:`close`, or
:meth:`refuse_all` when its turn budget is spent) every request gets an error response at once, never a hang.
``GET /v1/models`` lists one model (some clients ask).

Example:
    >>> import json, queue, threading, urllib.request
    >>> events = queue.Queue()
    >>> server = EpisodeServer(events, api_key="k")
    >>> def answer():
    ...     kind, pending = events.get()
    ...     pending.answer(200, {"seen": pending.request.messages[-1]["content"]})
    >>> threading.Thread(target=answer).start()
    >>> body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Hi"}]}).encode()
    >>> request = urllib.request.Request(server.base_url + "/chat/completions", body, {"Authorization": "Bearer k"})
    >>> json.load(urllib.request.urlopen(request))
    {'seen': 'Hi'}
    >>> server.close("episode over")
"""

from __future__ import annotations

import json
import queue
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from trl_env.agents.requests import ChatRequest, RequestError, error_body, read_request


class PendingRequest:
    """A valid request waiting for its answer (set once, by the env or by :meth:`EpisodeServer.close`)."""

    def __init__(self, request: ChatRequest) -> None:
        self.request = request
        self._answered = threading.Event()
        self.status, self.body = 500, error_body("no answer", kind="server_error")

    def answer(self, status: int, body: dict[str, Any]) -> None:
        """Send the HTTP answer (a second call is ignored: the first answer stands)."""
        if not self._answered.is_set():
            self.status, self.body = status, body
            self._answered.set()

    @property
    def answered(self) -> bool:
        return self._answered.is_set()

    def wait(self) -> tuple[int, dict[str, Any]]:
        self._answered.wait()
        return self.status, self.body


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"  # keep-alive: the SDKs reuse one connection per client

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # one line per request on stderr would drown the training logs

    def setup(self) -> None:
        super().setup()
        # small writes on a kept-alive connection otherwise wait for the peer's delayed ACK (~40 ms per request)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.episode.connections.add(self.connection)

    def finish(self) -> None:
        super().finish()
        self.server.episode.connections.discard(self.connection)

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _authorised(self) -> bool:
        if self.headers.get("Authorization", "") == f"Bearer {self.server.episode.api_key}":
            return True
        self._send(401, error_body("wrong API key for this episode's endpoint", kind="authentication_error"))
        return False

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        if not self._authorised():
            return
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [{"id": "trl-env", "object": "model", "owned_by": "trl-env"}]})
        else:
            self._send(404, error_body(f"no route {self.path}: use POST /v1/chat/completions", kind="not_found"))

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)  # read before any answer: the connection stays usable
        if not self._authorised():
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, error_body(f"no route {self.path}: use POST /v1/chat/completions", kind="not_found"))
            return
        self._send(*self.server.episode.handle(raw))


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True  # a client holding a connection open never keeps the process alive
    episode: EpisodeServer


class EpisodeServer:
    """The endpoint of one episode.

    Args:
        events: the episode's event queue; each valid request is put on it as ``("request", PendingRequest)``.
        api_key: the key requests must carry (``Authorization: Bearer ...``).
    """

    def __init__(self, events: queue.Queue, api_key: str) -> None:
        self.events, self.api_key = events, api_key
        self.refused: list[str] = []  # every refused request's reason, for the episode's error message
        self.connections: set[socket.socket] = set()  # kept-alive client connections, each held by a handler thread
        self._lock = threading.Lock()
        self._pending: PendingRequest | None = None
        self._last: ChatRequest | None = None  # the last request handed to the env: the next one resends it
        self._refusal: str | None = None
        self._http = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._http.episode = self
        self._thread = threading.Thread(target=self._http.serve_forever, name="trl-env-agent-endpoint", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, what OpenAI clients take as ``base_url``."""
        return f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def handle(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """Validate a request body, hand it to the env and wait for its answer (or refuse it at once)."""
        try:
            try:
                body = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise RequestError("body", f"not JSON ({error})") from None
            request = read_request(body, self._last)
        except RequestError as error:
            self.refused.append(str(error))
            return 400, error_body(str(error), error.field)
        with self._lock:
            refusal = self._refusal
            if refusal is None and self._pending is not None:
                refusal = "one request at a time per episode: the previous request has no answer yet"
            if refusal is None:
                pending = self._pending = PendingRequest(request)
                self._last = request
        if refusal is not None:
            self.refused.append(refusal)
            return 400, error_body(refusal, kind="episode_over")
        self.events.put(("request", pending))
        return pending.wait()

    def answer(self, status: int, body: dict[str, Any]) -> bool:
        """Answer the request in wait (if any; returns whether there was one); the next one may come."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            pending.answer(status, body)
        return pending is not None

    def refuse_all(self, reason: str) -> None:
        """From now on answer every request, the one in wait included, with an error saying ``reason``."""
        with self._lock:
            self._refusal = reason
        if self.answer(400, error_body(reason, kind="episode_over")):
            self.refused.append(reason)

    def close(self, reason: str) -> None:
        """Refuse every request (``reason``), stop the server and end its open connections (and their threads)."""
        self.refuse_all(reason)
        self._http.shutdown()
        self._http.server_close()
        self._thread.join()
        for connection in list(self.connections):  # a client keeping its connection open holds a handler thread
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the client
