"""`teleton doctor`'s Reranker line, shown only when ``memory.reranker`` is a cross-encoder: OK with its files
in place, else FAIL with the fix (`teleton setup` for a model not downloaded yet, the pin or the file for a
sum that does not match)."""

from __future__ import annotations

from pathlib import Path

import pytest

from teleton.memory.embeddings.hf_download import default_cache_dir, model_dir
from teleton.memory.rerank.cross_encoder import load_cross_encoder
from teleton.providers.extras import install_command
from tests.cli.test_doctor_providers import checks
from tests.conftest import without_extra
from tests.fakes.cross_encoder import hf_config, model_folder
from tests.fakes.hf_hub import FakeHub

NO_EMBEDDINGS = {"embedding": {"provider": "none"}}


def reranker(**settings: object) -> dict[str, object]:
    return {**NO_EMBEDDINGS, "memory": {"reranker": {"kind": "cross_encoder", **settings}}}


def test_no_reranker_no_line(tmp_path: Path) -> None:
    assert "Reranker" not in checks(tmp_path, NO_EMBEDDINGS)


def test_a_model_folder_with_its_files_is_ok(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "tiny-ce")
    check = checks(tmp_path, reranker(model_path=str(folder)))["Reranker"]
    assert (check.ok, check.detail) == (True, f"tiny-ce ({folder / 'model.onnx'})")


def test_a_model_not_downloaded_says_run_setup(tmp_path: Path) -> None:
    check = checks(tmp_path, reranker(model="acme/not-fetched"))["Reranker"]
    assert (check.ok, check.detail) == (False, "reranker model acme/not-fetched is not downloaded yet")
    assert check.fix == "run `teleton setup` to download it"


def test_a_wrong_pin_names_the_file_to_fix(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "tiny-ce")
    check = checks(tmp_path, reranker(model_path=str(folder), sha256={"model.onnx": "0" * 64}))["Reranker"]
    assert check.ok is False and f"{folder / 'model.onnx'} is not the pinned file" in check.detail
    assert check.fix == "replace the file, or correct memory.reranker.sha256 for model.onnx"


def test_a_download_changed_afterwards_fails_with_the_way_back(
    tmp_path: Path,
    hub: FakeHub,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the default model cache, this test's own
    hub.publish("acme/tiny-ce", model_folder(tmp_path / "published"))
    load_cross_encoder(hf_config(), hf_base_url=hub.url).close()  # into the default cache, as setup does
    assert checks(tmp_path, reranker(model="acme/tiny-ce"))["Reranker"].ok is True
    cache = model_dir(default_cache_dir(), "acme/tiny-ce")
    onnx_file = cache / "onnx" / "model.onnx"
    onnx_file.write_bytes(onnx_file.read_bytes() + b"\0")
    check = checks(tmp_path, reranker(model="acme/tiny-ce"))["Reranker"]
    assert check.ok is False and f"{onnx_file} is not the pinned file" in check.detail
    assert check.fix == f"delete {cache} and run `teleton setup` to download it again"


def test_without_the_hf_extra_the_line_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = model_folder(tmp_path / "tiny-ce")
    without_extra(monkeypatch, "hf")
    check = checks(tmp_path, reranker(model_path=str(folder)))["Reranker"]
    assert (check.ok, check.fix) == (False, install_command("hf"))
    assert check.detail.startswith("the reranker needs the hf extra (tokenizers is not installed)")
