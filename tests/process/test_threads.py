"""One rule for compute threads: one BLAS thread (OpenBLAS's others busy-wait between a search's products),
every core the process may run on for ONNX Runtime and the transcriber."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

PROBE = """
import json, sys
import numpy  # noqa: F401  (loaded: threadpoolctl sees only loaded libraries)
from threadpoolctl import threadpool_info
from teleton.process.threads import cores, limit_blas_threads
before = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
limit_blas_threads()
after = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"before": before, "after": after, "cores": cores()}))
"""


def _probe(*prefix: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([*prefix, sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def test_blas_runs_on_one_thread_after_the_limit() -> None:
    seen = _probe()
    assert seen["after"] and all(n == 1 for n in seen["after"])  # numpy's BLAS was found and limited
    if seen["cores"] > 1:
        assert max(seen["before"]) > 1  # the limit is what made it one


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
def test_the_core_count_is_the_cores_the_process_may_use() -> None:
    assert _probe("taskset", "-c", "0")["cores"] == 1
    assert _probe()["cores"] == len(os.sched_getaffinity(0))


COMMAND_PROBE = """
import json
from threadpoolctl import threadpool_info
from teleton.cli.main import app
app(["version"], standalone_mode=False)
print(json.dumps([p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]))
"""


def test_every_command_computes_with_one_blas_thread() -> None:
    # The limit sits in the `teleton` command's callback: `feed search`, `memory index` and the others search
    # and embed as the daemon does, never with BLAS threads busy-waiting on a small server's other core.
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", COMMAND_PROBE], capture_output=True, text=True, env=env, check=True)
    threads = json.loads(out.stdout.splitlines()[-1])
    assert threads and all(n == 1 for n in threads)
