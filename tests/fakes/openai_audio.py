"""A scripted OpenAI-style ``POST /v1/audio/transcriptions`` on 127.0.0.1.

It parses the real multipart body (``file``, ``model``, ``response_format``, ``language``) and keeps every
request in ``requests``. ``texts`` are answered in order (then "transcript N"); ``key`` (if set) is the only
accepted bearer token (anything else gets OpenAI's 401); ``failures`` is a list of ``(status, retry_after)``
answered, in order, before the next success; ``verbose`` False makes it refuse ``verbose_json`` with a 400,
as ``gpt-4o-transcribe`` does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from email.parser import BytesParser
from email.policy import HTTP
from http.server import ThreadingHTTPServer
from typing import Any

from tests.fakes.local_http import Quiet, serve, stop


@dataclass
class Upload:
    fields: dict[str, str]
    filename: str
    content_type: str
    data: bytes


class FakeTranscriptions:
    def __init__(self, *, key: str | None = None, language: str = "english", verbose: bool = True) -> None:
        self.key = key
        self.language = language
        self.verbose = verbose
        self.texts: list[str] = []
        self.failures: list[tuple[int, str | None]] = []
        self.requests: list[Upload] = []
        self.calls = 0  # every POST, including the ones refused before their upload was read
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, path: str, headers: Any, raw: bytes) -> tuple[int, dict[str, str], Any]:
        with self._lock:
            self.calls += 1
        if self.key is not None and headers.get("authorization") != f"Bearer {self.key}":
            error = {"message": "Incorrect API key provided: sk-wrong.", "type": "invalid_request_error"}
            return 401, {}, {"error": error}
        assert path == "/v1/audio/transcriptions", path
        upload = parse_multipart(headers["content-type"], raw)
        with self._lock:
            self.requests.append(upload)
            if self.failures:
                status, retry_after = self.failures.pop(0)
                extra = {"retry-after": retry_after} if retry_after is not None else {}
                return status, extra, {"error": {"message": f"error {status}", "type": "server_error"}}
            response_format = upload.fields.get("response_format", "json")
            if response_format == "verbose_json" and not self.verbose:
                message = "response_format 'verbose_json' is not compatible with this model"
                return 400, {}, {"error": {"message": message, "type": "invalid_request_error"}}
            text = self.texts.pop(0) if self.texts else f"transcript {len(self.requests)}"
        if response_format == "verbose_json":
            return 200, {}, {"task": "transcribe", "language": self.language, "duration": 3.5, "text": text}
        return 200, {}, {"text": text}

    def __enter__(self) -> FakeTranscriptions:
        fake = self

        class Handler(Quiet):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers["content-length"]))
                status, extra, payload = fake.answer(self.path, self.headers, raw)
                self.send_json(status, payload, extra)

        self._server = serve(Handler)
        return self

    def __exit__(self, *exc: object) -> None:
        stop(self._server)


def parse_multipart(content_type: str, raw: bytes) -> Upload:
    """A multipart/form-data body as the fields and the one file it carries (stdlib email parser)."""
    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
    fields: dict[str, str] = {}
    filename, file_type, data = "", "", b""
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True) or b""
        if part.get_filename():
            filename, file_type, data = part.get_filename(), part.get_content_type(), payload
        else:
            fields[str(name)] = payload.decode()
    return Upload(fields, filename, file_type, data)
