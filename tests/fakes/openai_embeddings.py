"""A scripted OpenAI-style ``POST /v1/embeddings`` (and ``GET /v1/models``) on 127.0.0.1.

Vectors are hashed bags of words, so texts sharing words are near each other and vector search has something
real to find. ``dims`` maps a model name to its dimension (others get 32); ``key`` (if set) is the only
accepted bearer token (anything else gets OpenAI's 401); ``failures`` is a list of statuses answered, in
order, before the next success (429 with ``retry-after: 0``). Every request body is kept in ``requests``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.local_http import Quiet, serve, stop


def bag_of_words(text: str, dims: int) -> list[float]:
    vector = [0.0] * dims
    for word in text.lower().split():
        vector[int(hashlib.sha256(word.strip(".,?!").encode()).hexdigest(), 16) % dims] += 1.0
    return vector


class FakeEmbeddings:
    def __init__(self, *, key: str | None = None, dims: dict[str, int] | None = None) -> None:
        self.key = key
        self.dims = dims or {}
        self.failures: list[int] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    def texts(self) -> list[str]:
        return [text for body in self.requests for text in body["input"]]

    def answer(self, path: str, auth: str | None, body: dict[str, Any] | None) -> tuple[int, dict[str, Any]]:
        if self.key is not None and auth != f"Bearer {self.key}":
            return 401, {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": name, "object": "model"} for name in self.dims]}
        assert body is not None and path == "/v1/embeddings"
        with self._lock:
            self.requests.append(body)
            if self.failures:
                status = self.failures.pop(0)
                return status, {"error": {"message": f"error {status}", "type": "server_error"}}
        size = self.dims.get(body["model"], 32)
        data = [
            {"object": "embedding", "index": i, "embedding": bag_of_words(text, size)}
            for i, text in enumerate(body["input"])
        ]
        return 200, {"object": "list", "data": data, "model": body["model"]}

    def __enter__(self) -> FakeEmbeddings:
        fake = self

        class Handler(Quiet):
            def do_GET(self) -> None:
                self._reply(*fake.answer(self.path, self.headers.get("authorization"), None))

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                self._reply(*fake.answer(self.path, self.headers.get("authorization"), body))

            def _reply(self, status: int, payload: dict[str, Any]) -> None:
                self.send_json(status, payload, {"retry-after": "0"} if status == 429 else None)

        self._server = serve(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self._server)
