"""The suite. pytest imports this package before any conftest or test module, so this is where bytecode is kept
between runs when the environment turns it off (PYTHONDONTWRITEBYTECODE): not in the source tree, which stays
as it was, but under the user's cache folder. Without it every run compiled Teleton and compiled and
assert-rewrote every test module anew, in each xdist worker: ~15 s of CPU a worker, before its first test.
A file that changed since is compiled again (the cached bytecode records its source's size and time)."""

import sys
from pathlib import Path

if sys.dont_write_bytecode and not sys.pycache_prefix:
    sys.pycache_prefix = str(Path.home() / ".cache" / "teleton-tests" / "pycache")
    sys.dont_write_bytecode = False
