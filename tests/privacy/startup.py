"""Starting a world: the planted workspace, a running daemon behind the obedient model, and the seeding.

Every world starts the same way (secrets planted where docs/privacy.md calls them the owner's, then each person
putting their own secrets where only they may read them), so the scenarios that need a daemon of their own
start from the same state as the shared one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.daemon.harness import Daemon, write_config
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_view import FakeOpenAIInAnthropicTerms, provider_config
from tests.privacy.obedient_model import ObedientModel, call
from tests.privacy.oracles import (
    ENV_SECRETS,
    PUBLIC_FAQ,
    S_BOBDM,
    S_BOBFACT,
    S_CORRECTION,
    S_DAILY,
    S_DAVEDM,
    S_DM,
    S_DOWNLOAD,
    S_ERRORS,
    S_FACT,
    S_GROUPX,
    S_GROUPXFILE,
    S_HEARTBEAT,
    S_MEMORY,
    S_NOTES,
    S_ROOT,
    S_STRATEGY,
    S_USERMD,
)
from tests.privacy.people import BOB, CAROL, DAVE, GINA, GROUP_X, OWNER, OWNER_ID, dm, group
from tests.privacy.steps import Step
from tests.privacy.world import World


def _today() -> str:
    return datetime.now().astimezone().strftime("%Y-%m-%d")


def plant_workspace(ws: Path) -> None:
    """Secrets everywhere docs/privacy.md calls the owner's, a public FAQ, and the path tricks."""
    day = _today()
    for sub in ("memory", "learnings", "downloads/1001", f"downloads/{GROUP_X}", "public"):
        (ws / sub).mkdir(parents=True, exist_ok=True)
    files = {
        "MEMORY.md": f"# Memory\n\n## Olga\nOlga's locker code is {S_MEMORY.token}. She banks with Nordbank.\n",
        "USER.md": f"# User\n\nOlga, passport number {S_USERMD.token}, lives in Tallinn.\n",
        "STRATEGY.md": f"# Strategy\n\nThe acquisition plan codename is {S_STRATEGY.token}.\n",
        "HEARTBEAT.md": f"# Heartbeat\n\n- check the heartbeat monitor {S_HEARTBEAT.token}\n",
        "learnings/errors.md": (
            "# Tool errors\n\nFailed tool calls, newest first. Avoid repeating them.\n\n"
            f"- `memory_recall` {{'query': 'tax id'}} -> tax id lookup failed {S_ERRORS.token} (seen 1x, last {day})\n"
        ),
        "learnings/corrections.md": (
            "# Corrections\n\nThings the owner corrected. They override older beliefs.\n\n"
            f"- {day}: Olga's sister is Ana, her safe code is {S_CORRECTION.token}\n"
        ),
        "memory/notes.md": f"# Notes\n\n## Bank\nThe bank PIN hint is {S_NOTES.token}.\n",
        f"memory/{day}.md": f"[07:00] User: my diary entry for today {S_DAILY.token} | Assistant: noted\n",
        "downloads/1001/passport.txt": f"Passport scan of Olga: {S_DOWNLOAD.token}\n",
        "notes.txt": f"root notes of Olga: {S_ROOT.token}\n",
        f"downloads/{GROUP_X}/agenda.txt": f"Group X agenda: {S_GROUPXFILE.token}\n",
        "public/faq.md": f"# FAQ\n\n## Meetings\nThe club meets on Tuesdays at the library. {PUBLIC_FAQ}\n",
    }
    for rel, content in files.items():
        (ws / rel).write_text(content)
    # Path tricks: links out of public/ and the persona files into private files, and out of the workspace.
    (ws / "public" / "leak.md").symlink_to("../MEMORY.md")
    (ws / "public" / "mem").symlink_to("../memory", target_is_directory=True)
    (ws / "memory" / "x.md").symlink_to("/etc/passwd")
    for persona, target in (("IDENTITY.md", "USER.md"), ("SECURITY.md", "STRATEGY.md")):
        (ws / persona).unlink(missing_ok=True)
        (ws / persona).symlink_to(target)


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def running_world(
    name: str, *, distill: bool = False, provider: str = "anthropic", **overrides: Any
) -> Iterator[World]:
    """A daemon with the planted workspace and the obedient model behind ``provider``'s API (anthropic or
    openai); stopped (and its files removed) after."""
    root = Path(f"/tmp/tlp-{os.getpid()}-{name}-{time.monotonic_ns() % 10**6}")
    root.mkdir()
    (root / "home").mkdir()
    api = (FakeAnthropic() if provider == "anthropic" else FakeOpenAIInAnthropicTerms()).start()
    api.responder = ObedientModel()
    daemon: Daemon | None = None
    try:
        config = write_config(
            root,
            api.base_url,
            **{
                "telegram.allow_from": [BOB["id"], CAROL["id"], DAVE["id"]],
                "telegram.admin_ids": [OWNER_ID, DAVE["id"]],
                "memory.distill": distill,
                "agent.request_timeout_s": 60,
                # no session ends by the clock mid-run (a summary would land in whichever step is running)
                "memory.session_reset_hour": None,
                "memory.session_idle_minutes": None,
                **provider_config(provider),
                **overrides,
            },
        )
        plant_workspace(root / "state" / "workspace")
        daemon = Daemon(root, config)
        with _env(ENV_SECRETS):
            daemon.start()
        assert daemon.sock is not None
        daemon.sock.settimeout(0.05)  # World.wait polls the socket, the log and the database
        world = World(
            name=name,
            root=root,
            api=api,
            daemon=daemon,
            distill=distill,
            allow_mode=overrides.get("privacy.cross_chat_sends") == "allow",
        )
        world.wait(lambda: any(e.get("event") == "teleton_ready" for e in world.read_logs()), "the daemon to start")
        yield world
    finally:
        if daemon is not None:
            daemon.stop()
        api.stop()
        shutil.rmtree(root, ignore_errors=True)


def seed_owner(world: World) -> dict[str, Step]:
    """The owner's DM: a fact and a message only the owner may read."""
    owner = dm(OWNER)
    fact = {"value": f"Olga's bank PIN is {S_FACT.token}", "category": "finance", "importance": 0.95}
    return {
        "owner_fact": world.step(owner, "Remember this. " + call("memory_save", fact)),
        "owner_dm": world.step(owner, f"Dear diary, the tram code is {S_DM.token}."),
        "owner_photo": world.step(owner, "the code for the fridge", media=fridge_photo(world.root / "fridge.png")),
    }


def fridge_photo(path: Path) -> dict[str, Any]:
    """A photo (drawn here) as the loopback transport takes it: the file and what Telegram would declare."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (640, 480), "lightyellow")
    ImageDraw.Draw(image).text((40, 200), "fridge code", fill="black")
    image.save(path, "PNG")
    return {"kind": "photo", "path": str(path), "size": path.stat().st_size, "mime_type": "image/png"}


def seed_others(world: World) -> dict[str, Step]:
    """Bob, Dave and group X put their secrets where only they (and the owner) may read them."""
    bob_fact = {"value": f"Bob's gym locker is {S_BOBFACT.token}", "category": "bob", "importance": 0.9}
    gx = group(GROUP_X, "groupx")
    steps = {
        "bob_fact": world.step(dm(BOB), call("memory_save", bob_fact), BOB),
        "bob_dm": world.step(dm(BOB), f"My own note to self: {S_BOBDM.token}", BOB),
        "dave_dm": world.step(dm(DAVE), f"Admin diary of Dave: {S_DAVEDM.token}", DAVE),
        "groupx": world.step(
            gx, "treasury " + call("memory_save", {"value": f"Group X treasury code {S_GROUPX.token}"}), GINA
        ),
    }
    world.step(gx, f"for the record: treasury code {S_GROUPX.token}", GINA, expect="context")
    return steps


OWNER_DIARY_MESSAGE_ID = 2  # the owner's DM message carrying S_DM (the second message of the owner's DM)
