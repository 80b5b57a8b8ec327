"""The local voice's files: eSpeak NG from its pip package, checked against pinned sums before loading."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from teleton.media.errors import MediaError
from teleton.media.speech_local import PINNED_SHA256, LocalSpeech, espeak_files
from teleton.providers.pinned_files import ModelFilesError, sha256_file
from tests.conftest import requires_extra

pytestmark = requires_extra("voice")


def packaged_root() -> Path:
    spec = importlib.util.find_spec("espeakng_loader")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def test_the_packaged_files_are_the_pinned_ones() -> None:
    library, data = espeak_files()
    assert sha256_file(library) == PINNED_SHA256["libespeak-ng.so"]
    assert (data / "phondata").is_file() and (data / "ru_dict").is_file() and (data / "fa_dict").is_file()


def test_an_altered_library_is_refused_before_it_is_loaded(tmp_path: Path) -> None:
    copy = tmp_path / "espeakng_loader"
    shutil.copytree(packaged_root(), copy)
    with (copy / "libespeak-ng.so").open("r+b") as f:
        f.seek(4096)
        f.write(b"\x90\x90")
    with pytest.raises(ModelFilesError, match="not the pinned file"):
        LocalSpeech(root=copy)
    shutil.copy2(packaged_root() / "libespeak-ng.so", copy / "libespeak-ng.so")
    (copy / "espeak-ng-data" / "phondata").unlink()
    with pytest.raises(ModelFilesError, match="phondata not found"):
        espeak_files(copy)


async def test_a_reply_with_nothing_to_say_is_one_line() -> None:
    speech = LocalSpeech()
    try:
        with pytest.raises(MediaError, match="nothing to say"):
            await speech.synthesize("** __ ## >")
    finally:
        await speech.aclose()
