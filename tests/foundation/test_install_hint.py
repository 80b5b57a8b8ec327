"""The command an extra's hint gives fits how Teleton was installed: this venv's own pip and the folder (the
clone) it was installed from, as README installs it, so pasting it into a shell adds the extra here."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from teleton.providers import extras

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times

REPO = Path(__file__).resolve().parents[2]


def words(command: str) -> list[str]:
    return [os.path.expanduser(w) for w in shlex.split(command)]  # as a shell reads it, "~" expanded


def test_the_hint_names_this_venvs_pip_and_the_clone_it_came_from() -> None:
    command = extras.install_command("voice")
    assert words(command) == [str(Path(sys.executable).parent / "pip"), "install", "-e", f"{REPO}[voice]"]
    # The real CLI outside the clone says the same (no source tree on its path to guess from).
    doctor = subprocess.run(
        [sys.executable, "-c", "from teleton.providers import extras; print(extras.install_command('voice'))"],
        cwd="/", capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert doctor.stdout.strip() == command


def test_a_folder_install_a_home_path_and_a_named_install_each_get_their_own_form() -> None:
    clone = {"url": Path.home().joinpath("src", "my teleton").as_uri(), "dir_info": {}}
    assert words(extras._requirement("web", clone)) == [f"{Path.home()}/src/my teleton[web]"]
    assert extras._requirement("web", clone).startswith("~/")  # as README spells the home folder
    assert extras._requirement("mcp", None) == "'teleton[mcp]'"  # from an index: the name
    assert extras._requirement("mcp", {"url": "https://example.invalid/t.whl"}) == "'teleton[mcp]'"
