"""Download a Hugging Face model's ONNX export once, with a progress bar, into a local cache.

Only used when ``embedding.model`` names a model id; the default model needs no network. A finished download
is recognised by its files being present, so the second start is offline. Files land under a ``.part`` name
and are renamed when complete, so an interrupted download is never mistaken for a model.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

from teleton.memory.embeddings.model_files import ModelFiles, directory_model
from teleton.providers.pinned_files import ModelFilesError

HF_BASE_URL = "https://huggingface.co"
# The ONNX file's place differs between repos; the first one that exists wins.
ONNX_CANDIDATES = ("onnx/model.onnx", "model.onnx")
TIMEOUT = httpx.Timeout(30.0, read=120.0)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "teleton" / "models"


def model_dir(cache_dir: Path, model_id: str) -> Path:
    return cache_dir / model_id.replace("/", "--")


def cached_or_download(
    model_id: str, cache_dir: Path | None = None, base_url: str = HF_BASE_URL, *, show_progress: bool = True
) -> ModelFiles:
    """Return the model's files, downloading the missing ones first."""
    target = model_dir(cache_dir or default_cache_dir(), model_id)
    files = directory_model(target, model_id)
    assert files.tokenizer is not None  # a Hugging Face layout names its tokenizer.json
    if files.onnx.is_file() and files.tokenizer.is_file():
        return files
    target.mkdir(parents=True, exist_ok=True)
    with (
        httpx.Client(base_url=base_url, timeout=TIMEOUT, follow_redirects=True) as client,
        Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            disable=not show_progress,
        ) as progress,
    ):
        if not files.tokenizer.is_file():
            _fetch(client, progress, f"/{model_id}/resolve/main/tokenizer.json", files.tokenizer)
        if not files.onnx.is_file():
            _fetch_first(client, progress, model_id, target)
    return directory_model(target, model_id)


def _fetch_first(client: httpx.Client, progress: Progress, model_id: str, target: Path) -> None:
    for candidate in ONNX_CANDIDATES:
        if _fetch(client, progress, f"/{model_id}/resolve/main/{candidate}", target / candidate, missing_ok=True):
            return
    raise ModelFilesError(f"model {model_id!r} has no ONNX export ({', '.join(ONNX_CANDIDATES)})")


def _fetch(client: httpx.Client, progress: Progress, url: str, dest: Path, *, missing_ok: bool = False) -> bool:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with client.stream("GET", url) as response:
        if response.status_code == 404 and missing_ok:
            return False
        if response.status_code != 200:
            raise ModelFilesError(f"downloading {url} failed: HTTP {response.status_code}")
        total = int(response.headers.get("content-length") or 0) or None
        task = progress.add_task(dest.name, total=total)
        with part.open("wb") as fh:
            for block in response.iter_bytes(1 << 16):
                fh.write(block)
                progress.advance(task, len(block))
    part.replace(dest)
    return True
