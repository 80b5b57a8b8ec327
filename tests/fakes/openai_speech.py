"""A scripted OpenAI-style ``POST /v1/audio/speech`` on 127.0.0.1: keeps each JSON body in ``requests`` and
answers Ogg bytes, or ``status`` when set (the error JSON OpenAI sends)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

AUDIO = b"OggS\x00\x02" + bytes(200)  # the bytes answered: what a client must save and send as they are


class FakeSpeech:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeSpeech:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append({"path": self.path, **body})
                ok = fake.status == 200 and self.path == "/v1/audio/speech"
                data = AUDIO if ok else json.dumps({"error": {"message": "speech is down"}}).encode()
                self.send_response(200 if ok else fake.status if fake.status != 200 else 404)
                self.send_header("content-type", "audio/ogg" if ok else "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
