"""The tool counts docs/tools.md states are the ones a session of each kind is offered with the default
configuration (the registry's own scope rule, as every turn builds its list)."""

from __future__ import annotations

import re
from pathlib import Path

from teleton.config.schema import Config
from teleton.gateway.contract import ChatInfo
from teleton.tools.suite import build_registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "tools.md"


def test_docs_state_the_counts_each_kind_of_session_is_offered() -> None:
    registry = build_registry(Config())
    dm, group = ChatInfo(id=5, type="dm"), ChatInfo(id=-100, type="group")
    offered = {
        "in the owner's DM": len(registry.available(dm, True, is_owner=True)),
        "in an admin's DM": len(registry.available(dm, True)),
        "in anyone else's DM": len(registry.available(dm, False)),
        "in a group for its admins": len(registry.available(group, True)),
        "for its other members": len(registry.available(group, False)),
    }
    text = " ".join(DOC.read_text().split())
    stated = {kind: int(m.group(1)) for kind in offered if (m := re.search(rf"(\d+) {re.escape(kind)}", text))}
    assert stated == offered
    assert text.startswith(f"# Tools {len(registry.available(dm, True, is_owner=True))} tools with the default")
    assert len(set(offered.values())) == len(offered)  # each kind of session sees its own list
