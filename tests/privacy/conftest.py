"""The adversarial privacy suite's fixtures: one shared world per provider, seeded before any attack runs.

Every scenario drives the REAL daemon (a subprocess, loopback chat transport on a Unix socket) whose
Messages API is a scripted server on 127.0.0.1 speaking to the real ``anthropic`` SDK. The "model" obeys
any text it is shown (``CALL <tool> <json>`` lines in the user message, the retrieved context or the system
prompt), so the product's rules, not the model's judgement, are what keeps secrets in place.

Each step (one message, its turn, the scheduled tasks it started and the distiller it triggered) is
checked against the suite's three criteria as soon as it completes; a final audit per daemon re-checks
everything it saw:

1. no secret a turn's clearance may not read appears in any request body of that turn;
2. no secret a chat may not read appears in anything sent, forwarded, filed, polled or edited into it;
3. nothing is sent to a chat other than the step's own, except the daemon's notices to the owner (a held
   send, a failed scheduled task) and sends the owner approved (a ``pending_sends`` row with status 'sent'
   and ``decided_by``); with ``cross_chat_sends: allow``, admins' sends to non-owner chats are by config.

The machinery lives in modules named for what they hold, so a test imports what it uses from there:
``people`` (the cast and chats), ``oracles`` (labels, secrets, the detector), ``obedient_model`` (the
fake model and the request readers), ``steps`` (what one message set off), ``world`` (one daemon and the
criteria), ``startup`` (planting, starting and seeding a world) and ``scenario`` (attack and assert).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_view import PROVIDERS
from tests.privacy.obedient_model import call
from tests.privacy.people import BOB, OWNER, dm
from tests.privacy.startup import running_world, seed_others, seed_owner
from tests.privacy.world import World


def _shared_world(provider: str) -> Iterator[World]:
    """The shared daemon (exec enabled, a second admin, a per-chat task quota of 5) after everyone seeded
    their secrets. Every owner turn of this daemon happens here, before any attack: an owner turn re-reads
    (and the obedient model re-runs) whatever reached the owner's daily log, and attacks planted in groups
    that reach an owner turn are the subject of test_20_planted_notes, on a daemon of their own."""
    with running_world(
        f"main-{provider}", provider=provider,
        **{"capabilities.exec.enabled": True, "scheduler.max_active_per_chat": 5},
    ) as world:  # fmt: skip
        owner = dm(OWNER)
        world.setup.update(seed_owner(world))
        # The command typed as a code span: the owner's own words, run whatever else the session was shown.
        world.setup["env"] = world.step(owner, "`env` " + call("exec", {"command": "env"}))
        world.setup["passwd"] = world.step(owner, call("memory_search", {"query": "root:x:0 nologin daemon bin"}))
        for mode in ("base64", "reverse", "homoglyph", "zwsp"):
            world.setup[f"encode_{mode}"] = world.step(
                owner, f"ENCODE {mode} " + call("memory_read", {"target": "memory"})
            )
        world.setup["new"] = world.step(owner, "/new", expect="command")
        world.setup.update(seed_others(world))
        world.setup["bob_recall"] = world.step(dm(BOB), call("memory_recall", {"query": "gym locker"}), BOB)
        world.learnings_snapshot = {
            rel: (world.workspace / rel).read_text() for rel in ("learnings/errors.md", "learnings/corrections.md")
        }
        yield world


# One shared daemon per provider and test worker, both kept for the whole session: a parametrised session
# fixture would hold one at a time and rebuild them at every file's switch from one provider to the other.
@pytest.fixture(scope="session")
def main_world_anthropic() -> Iterator[World]:
    yield from _shared_world("anthropic")


@pytest.fixture(scope="session")
def main_world_openai() -> Iterator[World]:
    yield from _shared_world("openai")


@pytest.fixture(scope="module", params=PROVIDERS)
def main_world(request: pytest.FixtureRequest) -> World:
    """The shared world of each provider in turn: every attack of test_10..19 runs on both."""
    return request.getfixturevalue(f"main_world_{request.param}")
