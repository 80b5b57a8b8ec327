"""`teleton setup` fetches and loads a configured cross-encoder once and says so in one line; a reranker that
cannot load is one yellow line, and the rest of the setup goes on."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from typer.testing import CliRunner

from teleton.cli.setup_reranker import prepare_reranker
from teleton.config import load_config
from teleton.memory.embeddings.hf_download import SUMS_FILE, model_dir
from tests.cli.test_setup_login import _cli
from tests.fakes.cross_encoder import model_folder
from tests.fakes.hf_hub import FakeHub


def setup_with(tmp_path: Path, monkeypatch: Any, reranker: dict[str, Any]) -> Any:
    path = tmp_path / "config.yaml"
    config = {"storage": {"data_dir": str(tmp_path / "data")}, "embedding": {"provider": "none"}}
    path.write_text(yaml.safe_dump({**config, "memory": {"reranker": reranker}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    return CliRunner().invoke(_cli(), ["setup", "--non-interactive", "--mode", "terminal"])


def test_setup_loads_the_configured_reranker_once_and_says_so(tmp_path: Path, monkeypatch: Any) -> None:
    folder = model_folder(tmp_path / "tiny-ce")
    result = setup_with(tmp_path, monkeypatch, {"kind": "cross_encoder", "model_path": str(folder)})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("reranker")]
    assert len(lines) == 1 and lines[0].startswith("reranker tiny-ce ready")


def test_a_reranker_that_cannot_load_is_one_line_and_setup_goes_on(tmp_path: Path, monkeypatch: Any) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = setup_with(tmp_path, monkeypatch, {"kind": "cross_encoder", "model_path": str(empty)})
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("reranker")]
    assert len(lines) == 1 and lines[0].startswith("reranker not ready: reranker model file: ")
    assert "model.onnx not found" in lines[0] and lines[0].endswith("(`teleton doctor` says more)")
    assert "teleton chat" in result.output  # the setup finished


def test_no_reranker_configured_prints_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    result = setup_with(tmp_path, monkeypatch, {})
    assert result.exit_code == 0, result.output
    assert not [line for line in result.output.splitlines() if line.startswith("reranker")]


def test_a_hugging_face_reranker_is_downloaded_by_setup(tmp_path: Path, hub: FakeHub) -> None:
    hub.publish("acme/tiny-ce", model_folder(tmp_path / "published"))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"memory": {"reranker": {"kind": "cross_encoder", "model": "acme/tiny-ce"}}}))
    out = io.StringIO()
    console = Console(file=out, width=200)
    cache = tmp_path / "cache"
    assert prepare_reranker(load_config(path), console, cache_dir=cache, hf_base_url=hub.url)
    assert out.getvalue().splitlines()[-1].startswith("reranker acme/tiny-ce ready")
    assert (model_dir(cache, "acme/tiny-ce") / SUMS_FILE).is_file()
