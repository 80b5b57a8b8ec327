"""Time from a fresh clone to the first answer in `teleton chat`, following the README's quick start.

Clones this repository into a temporary home, creates the virtual environment and installs as the README
says (pip's cache is the machine's own, as on a second install; pass --cold for an empty cache), runs
`teleton setup --non-interactive --mode terminal`, then `teleton chat` in a pseudo-terminal against the fake
Messages API on 127.0.0.1 and types one message. Prints each phase and the total.

    python scripts/first_answer.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.cli.test_chat_terminal import Terminal  # noqa: E402
from tests.fakes.anthropic_server import FakeAnthropic, text  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cold", action="store_true", help="an empty pip cache (downloads everything)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="first-answer-"))
    home = root / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TELETON_", "ANTHROPIC_", "VIRTUAL_ENV"))}
    env["HOME"] = str(home)
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if ".venv" not in p)
    env["PIP_CACHE_DIR"] = str(root / "pip-cache" if args.cold else Path.home() / ".cache" / "pip")
    venv = home / ".teleton" / "venv"
    phases: list[tuple[str, float]] = []

    def run(name: str, command: str, cwd: Path) -> None:
        started = time.monotonic()
        subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=cwd, env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        phases.append((name, time.monotonic() - started))

    run("clone", f"git clone -q {REPO} teleton", root)
    run("venv + pip install .", f"python3 -m venv {venv} && {venv}/bin/pip install -q .", root / "teleton")
    run("setup (terminal only)", f"{venv}/bin/teleton setup --non-interactive --mode terminal", root)
    with FakeAnthropic() as fake:
        fake.responder = lambda body: text("Hello! I am here.")
        config = home / ".teleton" / "config.yaml"
        data = yaml.safe_load(config.read_text()) or {}
        data.setdefault("agent", {}).update(base_url=fake.base_url, api_key="sk-ant-test")
        config.write_text(yaml.safe_dump(data))
        started = time.monotonic()
        term = Terminal(config, home, executable=str(venv / "bin" / "teleton"))
        term.wait_text("you>")
        phases.append(("teleton chat to its prompt", time.monotonic() - started))
        started = time.monotonic()
        term.type("hello")
        term.wait_text("Hello! I am here.")
        phases.append(("first answer (fake API, ~0 s model time)", time.monotonic() - started))
        term.close()
    for name, seconds in phases:
        print(f"{name:45s} {seconds:7.1f} s")
    print(f"{'total':45s} {sum(s for _, s in phases):7.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
