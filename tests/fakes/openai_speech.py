"""A scripted OpenAI-style ``POST /v1/audio/speech`` on 127.0.0.1: keeps each JSON body in ``requests`` and
answers Ogg bytes, or ``status`` when set (the error JSON OpenAI sends)."""

from __future__ import annotations

import json
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.local_http import Quiet, serve, stop

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

        class Handler(Quiet):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.requests.append({"path": self.path, **body})
                if fake.status == 200 and self.path == "/v1/audio/speech":
                    self.send(200, AUDIO, "audio/ogg")
                else:
                    self.send_json(fake.status if fake.status != 200 else 404, {"error": {"message": "speech is down"}})

        self._server = serve(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self._server)
