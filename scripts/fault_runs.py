"""Exactly once under faults, over several seeds (the suite runs one): the real daemon over the loopback
transport, 100 messages over 10 DMs and 3 groups, cut at 10 seeded random points with kill -9 and, in a
second run, with SIGTERM; every message replayed after each restart; what the chats RECEIVED is counted.

    python scripts/fault_runs.py --seeds 20261122 1 2 [--outage-s 8]

Prints one line per run; exits 1 if any message was not answered exactly once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[20261122, 1, 2])
    parser.add_argument("--outage-s", type=float, default=0.0, help="the model API down after each restart")
    args = parser.parse_args()
    failed = 0
    for seed in args.seeds:
        os.environ["TELETON_FAULT_SEED"] = str(seed)
        import importlib

        from tests.daemon import faults

        importlib.reload(faults)  # SEED is read at import
        from tests.fakes.anthropic_server import FakeAnthropic

        for name, kills, terms in (("kill -9", 10, 0), ("SIGTERM", 0, 10)):
            root = Path(tempfile.mkdtemp(prefix="tlt-f", dir="/tmp"))  # short: the Unix socket lives here
            (root / "home").mkdir()
            started = time.monotonic()
            try:
                with FakeAnthropic() as api:
                    summary = faults.run_with_faults(root, api, kills=kills, terms=terms, outage_s=args.outage_s)
            except AssertionError as exc:
                failed += 1
                summary = f"FAILED: {str(exc)[:500]}"
            finally:
                shutil.rmtree(root, ignore_errors=True)
            print(f"{name:8} seed {seed}: {summary} ({time.monotonic() - started:.0f} s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
