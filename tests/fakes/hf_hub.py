"""A fake Hugging Face on 127.0.0.1: serves the files a test publishes under a model id and counts requests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.fakes.local_http import Quiet, serve, stop


@dataclass
class FakeHub:
    url: str = ""
    files: dict[str, bytes] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)

    def publish(self, model_id: str, folder: Path, onnx_at: str = "onnx/model.onnx") -> None:
        self.files[f"/{model_id}/resolve/main/tokenizer.json"] = (folder / "tokenizer.json").read_bytes()
        self.files[f"/{model_id}/resolve/main/{onnx_at}"] = (folder / "model.onnx").read_bytes()


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    served = FakeHub()

    class Handler(Quiet):
        def do_GET(self) -> None:
            served.requests.append(self.path)
            body = served.files.get(self.path)
            self.send(200 if body is not None else 404, body or b"", "application/octet-stream")

    server = serve(Handler)
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield served
    stop(server)
