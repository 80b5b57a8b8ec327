"""Download a Hugging Face model's ONNX export once, with a progress bar, into a local cache.

Only used when ``embedding.model`` names a model id; the default model needs no network. A finished download
is recognised by its files being present, so the second start is offline. Files land under a ``.part`` name
and are renamed when complete, so an interrupted download is never mistaken for a model. With
``record_sums`` (the reranker's downloads), the SHA-256 of each file's bytes as they arrived is recorded in a
``SHA256SUMS`` file beside them (``sha256sum -c`` reads it), so a later load can tell a file changed since.
"""

from __future__ import annotations

import hashlib
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
SUMS_FILE = "SHA256SUMS"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "teleton" / "models"


def model_dir(cache_dir: Path, model_id: str) -> Path:
    return cache_dir / model_id.replace("/", "--")


def cached(model_id: str, cache_dir: Path | None = None) -> ModelFiles | None:
    """The model's files when a download of them finished (both renamed into place), else None."""
    files = directory_model(model_dir(cache_dir or default_cache_dir(), model_id), model_id)
    assert files.tokenizer is not None  # a Hugging Face layout names its tokenizer.json
    return files if files.onnx.is_file() and files.tokenizer.is_file() else None


def cached_or_download(
    model_id: str,
    cache_dir: Path | None = None,
    base_url: str = HF_BASE_URL,
    *,
    show_progress: bool = True,
    record_sums: bool = False,
) -> ModelFiles:
    """Return the model's files, downloading the missing ones first (``record_sums``: see the module)."""
    found = cached(model_id, cache_dir)
    if found is not None:
        return found
    target = model_dir(cache_dir or default_cache_dir(), model_id)
    files = directory_model(target, model_id)
    assert files.tokenizer is not None  # a Hugging Face layout names its tokenizer.json
    target.mkdir(parents=True, exist_ok=True)
    sums = target if record_sums else None
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
            _fetch(client, progress, f"/{model_id}/resolve/main/tokenizer.json", files.tokenizer, sums=sums)
        if not files.onnx.is_file():
            _fetch_first(client, progress, model_id, target, sums)
    return directory_model(target, model_id)


def recorded_sums(directory: Path) -> dict[str, str] | None:
    """``SHA256SUMS`` in ``directory`` as {path relative to it: sum}, or None when there is no such file."""
    path = directory / SUMS_FILE
    if not path.is_file():
        return None
    sums: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        digest, _, name = line.partition("  ")
        if digest and name:
            sums[name.lstrip("*")] = digest.lower()
    return sums


def _record_sum(directory: Path, name: str, digest: str) -> None:
    # Merged with what is recorded (a download interrupted after its first file records the rest later), and
    # written under another name first, so a crash never leaves a half-written list.
    sums = recorded_sums(directory) or {}
    sums[name] = digest
    part = directory / (SUMS_FILE + ".part")
    part.write_text("".join(f"{d}  {n}\n" for n, d in sorted(sums.items())), encoding="utf-8")
    part.replace(directory / SUMS_FILE)


def _fetch_first(client: httpx.Client, progress: Progress, model_id: str, target: Path, sums: Path | None) -> None:
    for candidate in ONNX_CANDIDATES:
        url = f"/{model_id}/resolve/main/{candidate}"
        if _fetch(client, progress, url, target / candidate, missing_ok=True, sums=sums):
            return
    raise ModelFilesError(f"model {model_id!r} has no ONNX export ({', '.join(ONNX_CANDIDATES)})")


def _fetch(
    client: httpx.Client,
    progress: Progress,
    url: str,
    dest: Path,
    *,
    missing_ok: bool = False,
    sums: Path | None = None,  # the folder whose SHA256SUMS records this file
) -> bool:
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    with client.stream("GET", url) as response:
        if response.status_code == 404 and missing_ok:
            return False
        if response.status_code != 200:
            raise ModelFilesError(f"downloading {url} failed: HTTP {response.status_code}")
        total = int(response.headers.get("content-length") or 0) or None
        task = progress.add_task(dest.name, total=total)
        digest = hashlib.sha256()  # of the bytes as they arrive: what is recorded is what was downloaded
        with part.open("wb") as fh:
            for block in response.iter_bytes(1 << 16):
                fh.write(block)
                digest.update(block)
                progress.advance(task, len(block))
    if sums is not None:  # recorded before the rename: a file in place always has its sum
        _record_sum(sums, dest.relative_to(sums).as_posix(), digest.hexdigest())
    part.replace(dest)
    return True
