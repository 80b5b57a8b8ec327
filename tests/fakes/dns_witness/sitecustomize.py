"""Test only: a daemon under test resolves no host name but this machine's, and writes down every one it tried.

The daemon's subprocess gets this folder on PYTHONPATH (``tests/daemon/harness.py``), so Python imports this
module at start. A host name is payload (docs/privacy.md: a secret can ride in it to whoever answers the lookup),
so the privacy suite reads the list (``DNS_WITNESS_LOG``) to see what tried to leave. Nothing leaves
this machine either way: the lookup fails as it would with no network.
"""

from __future__ import annotations

import ipaddress
import os
import socket

_LOG = os.environ.get("DNS_WITNESS_LOG")
_real = socket.getaddrinfo


def _local(name: str) -> bool:
    if name in ("localhost", "localhost.localdomain"):
        return True
    try:
        ipaddress.ip_address(name.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
    name = host.decode() if isinstance(host, bytes) else host
    if name is None or _local(str(name)):
        return _real(host, *args, **kwargs)
    with open(str(_LOG), "a", encoding="utf-8") as fh:
        fh.write(f"{name}\n")
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


if _LOG:
    socket.getaddrinfo = getaddrinfo
