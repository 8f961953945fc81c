"""Batched sampling through a running ``vllm serve``, from token ids to token ids.

Each :meth:`OpenAIServerGenerator.generate` call is one POST to ``/v1/completions`` whose
``prompt`` is the list of token-id contexts, so the server schedules the whole batch
together. The request asks for the sampled token's logprob (``logprobs=0``) with tokens
spelled ``token_id:N`` (``return_tokens_as_token_ids``), so ids are exact and never
re-tokenized. Only the standard library is used.

The server must run with ``--logprobs-mode processed_logprobs`` for the logprobs to be
those after temperature; the generator checks it through ``/server_info`` when the server
exposes it (``VLLM_SERVER_DEV_MODE=1``) and warns otherwise.

Example:
    >>> # vllm serve /tmp/tiny --logprobs-mode processed_logprobs --port 8000
    >>> generator = OpenAIServerGenerator("http://127.0.0.1:8000", temperature=0.7,
    ...                                   stop_token_ids=[151645])  # doctest: +SKIP
    >>> generator.generate([[151644, 872, 198]], max_new_tokens=8)[0].ids[-1]  # doctest: +SKIP
    151645
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from trl_env.core import Generation
from trl_env.errors import BackendError, ConfigError
from trl_env.generation.vllm_engine import PROCESSED

TOKEN_PREFIX = "token_id:"


def parse_choice(choice: dict[str, Any]) -> tuple[list[int], list[float]]:
    """The sampled ids and their logprobs from one ``/v1/completions`` choice.

    Ids come from the ``token_id:N`` strings of ``logprobs.tokens``, or from ``token_ids``
    when the server sent them too (they must agree).

    Example:
        >>> parse_choice({"logprobs": {"tokens": ["token_id:5", "token_id:2"], "token_logprobs": [-0.5, -1.0]}})
        ([5, 2], [-0.5, -1.0])
    """
    logprobs = choice.get("logprobs") or {}
    tokens, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    if tokens is None or values is None:
        raise BackendError("the server returned no logprobs; is this a vLLM OpenAI-compatible server?")
    if not all(isinstance(t, str) and t.startswith(TOKEN_PREFIX) for t in tokens):
        raise BackendError("the server ignored return_tokens_as_token_ids; it needs to be a vLLM server")
    ids = [int(t[len(TOKEN_PREFIX) :]) for t in tokens]
    if choice.get("token_ids") is not None and list(choice["token_ids"]) != ids:
        raise BackendError("the server's token_ids disagree with its logprob tokens")
    if len(values) != len(ids) or any(v is None for v in values):
        raise BackendError("the server returned a logprob list that does not match the sampled tokens")
    return ids, [float(v) for v in values]


class OpenAIServerGenerator:
    """A :class:`~trl_env.core.Generator` over a vLLM OpenAI-compatible server.

    ``base_url`` is the server root (``http://host:port``, with or without ``/v1``);
    ``model`` defaults to the first model the server lists. ``top_k=None`` disables top-k.
    It is a :class:`~trl_env.core.ConcurrentGenerator`: :meth:`submit` sends a request from a pool of
    ``max_concurrent_requests`` threads and returns at once, so the per-episode schedule keeps the
    server's continuous batching fed.
    """

    max_concurrent_requests = 256

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int | None = None,
        stop_token_ids: Sequence[int] | None = None,
        timeout: float = 600.0,
        api_key: str | None = None,
        check_logprobs_mode: bool = True,
    ) -> None:
        if temperature <= 0:
            raise ConfigError(f"temperature must be > 0 for sampling, got {temperature}")
        if not stop_token_ids:
            raise ConfigError("stop_token_ids is required: the end-of-turn token id(s)")
        root = base_url.rstrip("/")
        self.root = root[: -len("/v1")] if root.endswith("/v1") else root
        self.temperature = temperature
        self.top_p = top_p
        self.top_k = top_k
        self.stop_token_ids = list(stop_token_ids)
        self.timeout = timeout
        self.api_key = api_key
        self._requests: ThreadPoolExecutor | None = None
        self._requests_lock = threading.Lock()
        self.model = model or self._request("GET", "/v1/models")["data"][0]["id"]
        if check_logprobs_mode:
            self._check_logprobs_mode()

    def _request(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.root + path, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            detail = error.read().decode(errors="replace")[:500]
            raise BackendError(f"{method} {self.root + path} failed with HTTP {error.code}: {detail}") from error

    def _check_logprobs_mode(self) -> None:
        try:
            info = self._request("GET", "/server_info?config_format=json")
        except (RuntimeError, urllib.error.URLError):
            warnings.warn(
                f"cannot read the server's logprobs mode (no /server_info); make sure it runs with "
                f"--logprobs-mode {PROCESSED}, or the logprobs are not those after temperature",
                stacklevel=3,
            )
            return
        mode = ((info.get("vllm_config") or {}).get("model_config") or {}).get("logprobs_mode")
        if mode is not None and mode != PROCESSED:
            raise ConfigError(
                f"the server runs with --logprobs-mode {mode}; restart it with --logprobs-mode {PROCESSED}"
            )

    def request_body(self, contexts: list[list[int]], max_new_tokens: int) -> dict[str, Any]:
        """The JSON body of one batched ``/v1/completions`` request.

        Example:
            >>> generator.request_body([[1, 2]], 4)["prompt"]  # doctest: +SKIP
            [[1, 2]]
        """
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": [list(c) for c in contexts],
            "max_tokens": max_new_tokens,
            "n": 1,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "logprobs": 0,
            "return_tokens_as_token_ids": True,
            "return_token_ids": True,
            "stop_token_ids": self.stop_token_ids,
            "ignore_eos": True,
            "skip_special_tokens": False,
        }
        if self.top_k:
            body["top_k"] = self.top_k
        return body

    def generate(self, contexts: list[list[int]], max_new_tokens: int) -> list[Generation]:
        """Sample up to ``max_new_tokens`` for each context in one request.

        Example:
            >>> [len(g.ids) <= 4 for g in generator.generate([[151644, 872], [151644, 77091]], 4)]  # doctest: +SKIP
            [True, True]
        """
        if not contexts:
            return []
        choices = self._request("POST", "/v1/completions", self.request_body(contexts, max_new_tokens))["choices"]
        if len(choices) != len(contexts):
            raise BackendError(f"the server returned {len(choices)} choices for {len(contexts)} prompts")
        generations = []
        for choice in sorted(choices, key=lambda c: c["index"]):
            generations.append(Generation(*parse_choice(choice)))  # the server stopped at a stop token, if any
        return generations

    def submit(self, contexts: list[list[int]], max_new_tokens: int) -> Future[list[Generation]]:
        """:meth:`generate` in a background thread: returns at once with its future.

        Example:
            >>> generator.submit([[151644, 872]], 4).result()[0].ids[-1] in generator.stop_token_ids  # doctest: +SKIP
            True
        """
        with self._requests_lock:
            if self._requests is None:
                self._requests = ThreadPoolExecutor(self.max_concurrent_requests, thread_name_prefix="openai-request")
        return self._requests.submit(self.generate, contexts, max_new_tokens)
