"""The README's "no Telegram yet" quick start, run as written: a fresh home directory, a clone of this
repository, a new virtual environment installed from the package index (as CI's own is), up to
`teleton doctor`. Only the clone URL placeholder is filled in."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.costly

REPO = Path(__file__).resolve().parents[2]


def quickstart(name: str = "terminal") -> list[str]:
    readme = (REPO / "README.md").read_text()
    block = re.search(rf"<!-- ci:quickstart-{name} -->\n```bash\n(.*?)```", readme, re.S)
    assert block, f"README.md lost its ci:quickstart-{name} block"
    return block.group(1).strip().splitlines()


def upto_doctor(lines: list[str]) -> str:
    upto = next(i for i, line in enumerate(lines) if "teleton doctor" in line)
    return "\n".join(lines[: upto + 1]).replace("<this repository's URL>", str(REPO))


@pytest.mark.timeout(1800)  # a whole install: on a busy machine it outlasts the suite's 300 s per test
def test_the_readme_quick_starts_run_as_written_up_to_doctor(tmp_path: Path) -> None:
    """The terminal block, then the local-model block in the same home (it sets up over the first)."""
    terminal, local = upto_doctor(quickstart("terminal")), upto_doctor(quickstart("local"))
    script = f"{terminal}\necho '== local model =='\n{local}"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip"))  # a warm cache, same files
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    first, second = proc.stdout.split("== local model ==")
    doctor = first[first.index("Python") :]
    assert "FAIL" not in doctor
    for check in ("Embedding model", "sqlite-vec", "FTS5", "Config", "Anthropic API key", "Data directory"):
        assert f"OK   {check}" in doctor
    assert "SKIP Telegram session" in doctor and "terminal only" in doctor
    # The lean install has no local transcription: said, not failed, with the command for this install (the
    # venv's own pip and the clone it was installed from, as README's own voice line says it).
    flat = " ".join(doctor.split())
    assert re.search(r"not transcribed: ~/\.teleton/venv/bin/pip install '\S+/teleton\[voice\]'", flat), flat
    config = home / ".teleton" / "config.yaml"
    assert config.stat().st_mode & 0o777 == 0o600
    local_doctor = second[second.index("Python") :]
    assert "FAIL" not in local_doctor, local_doctor
    assert "qwen3:8b" in config.read_text() and "ollama" in config.read_text()
