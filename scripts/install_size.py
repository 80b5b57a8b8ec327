"""What an install costs on disk: a fresh virtual environment, `pip install` as the README says, `du`.

Installs this checkout (or a git revision of it) into a new venv per variant — the default install and each
extra asked for — and prints the venv's size and its largest packages. pip's cache is the machine's own.

    python scripts/install_size.py                      # the default install and [voice]
    python scripts/install_size.py --extras "" voice all --rev 512cecd
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def du_mb(path: Path) -> float:
    out = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(out.split()[0]) / 1024


def largest(site: Path, n: int) -> list[tuple[float, str]]:
    sizes = [(du_mb(p), p.name) for p in site.iterdir() if p.is_dir() and not p.name.endswith(".dist-info")]
    return sorted(sizes, reverse=True)[:n]


def measure(source: Path, extra: str, work: Path, top: int) -> None:
    venv = work / f"venv-{extra or 'default'}"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    target = f"{source}[{extra}]" if extra else str(source)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", target], check=True, stderr=subprocess.DEVNULL)
    site = next((venv / "lib").glob("python3*/site-packages"))
    print(f"pip install {'.' if not extra else f'.[{extra}]'}: {du_mb(venv):.0f} MB")
    print("   " + ", ".join(f"{name} {mb:.0f}" for mb, name in largest(site, top)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", nargs="*", default=["", "voice"], help='"" is the default install')
    parser.add_argument("--rev", help="a git revision to measure instead of the working tree")
    parser.add_argument("--top", type=int, default=12, help="how many of the largest packages to list")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        source = REPO
        if args.rev:
            source = work / "src"
            subprocess.run(["git", "clone", "-q", str(REPO), str(source)], check=True)
            subprocess.run(["git", "-C", str(source), "checkout", "-q", args.rev], check=True)
        for extra in args.extras:
            measure(source, extra, work, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
