"""`teleton memory facts | export | import` as a user runs them: the real CLI as a subprocess, a real database."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest

from teleton.memory.facts.rows import Fact
from teleton.memory.facts.sources import link
from teleton.memory.facts.store import FactStore
from teleton.storage import Database
from tests.foundation.test_cli import _config, teleton

pytestmark = pytest.mark.costly  # the teleton CLI in a subprocess, many times

CONFIG = "embedding:\n  provider: none\n"


def _home(root: Path, name: str) -> tuple[Path, Path]:
    home = root / name
    (home / ".teleton" / "workspace" / "memory").mkdir(parents=True)
    return home, _config(home, CONFIG)


async def _seed(home: Path) -> None:
    db = await Database.open(home / ".teleton" / "teleton.db")
    try:
        store = FactStore(db)
        await store.save(Fact("Olga lives in Lisbon", category="place", key="home_city", subject="owner"))
        await store.save(Fact("Olga lives in Porto", category="place", key="home_city", subject="owner"))
        await store.save(Fact("Alice is vegan", category="diet", scope="chat:-100777", subject="user:5151"))
        await db.execute(
            "insert into knowledge(source, path, heading, text, hash, label, created_at, updated_at) "
            "values ('session', 'sessions/4242/a', 'Summary', 'We planned the Porto move.', 'h1', 'owner', 1, 1)"
        )
    finally:
        await db.close()


def _facts(home: Path, config: Path, *args: str) -> list[dict]:
    proc = teleton("-c", str(config), "memory", "facts", "--json", *args, home=home)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_facts_export_and_import_move_memory_without_loss_or_duplicates(tmp_path: Path) -> None:
    home, config = _home(tmp_path, "old")
    asyncio.run(_seed(home))
    (home / ".teleton" / "workspace" / "MEMORY.md").write_text("# Notes\nThe spare key is with Rui.\n")

    assert [f["value"] for f in _facts(home, config)] == ["Alice is vegan", "Olga lives in Porto"]
    everything = _facts(home, config, "--history")
    assert {f["value"]: f["valid_until"] is None for f in everything} == {
        "Alice is vegan": True, "Olga lives in Porto": True, "Olga lives in Lisbon": False,
    }  # fmt: skip
    assert [f["value"] for f in _facts(home, config, "--subject", "5151")] == ["Alice is vegan"]
    table = teleton("-c", str(config), "memory", "facts", home=home).stdout
    assert "user:5151" in table and "chat:-100777" in table and "Lisbon" not in table
    # Each fact as it is stored, its label in brackets included (once read as markup: " Alice is vegan").
    assert "[diet] Alice is vegan" in table and "[place/home_city] Olga lives in Porto" in table

    export = tmp_path / "memory.json"
    proc = teleton("-c", str(config), "memory", "export", str(export), home=home)
    assert proc.returncode == 0, proc.stderr
    assert "exported 3 facts, 1 entry and 1 file" in proc.stdout
    assert stat.S_IMODE(export.stat().st_mode) == 0o600

    new_home, new_config = _home(tmp_path, "new")
    proc = teleton("-c", str(new_config), "memory", "import", str(export), home=new_home)
    assert proc.returncode == 0, proc.stderr
    assert "imported 2 facts (1 replaced), 1 entry, 1 file" in proc.stdout
    moved = _facts(new_home, new_config, "--history")
    assert sorted((f["value"], f["subject"], f["scope"]) for f in moved) == sorted(
        (f["value"], f["subject"], f["scope"]) for f in everything
    )
    lisbon = next(f for f in moved if "Lisbon" in f["value"])
    porto = next(f for f in moved if "Porto" in f["value"])
    assert lisbon["superseded_by"] == porto["id"]  # the history chain survives the move
    assert (new_home / ".teleton" / "workspace" / "MEMORY.md").read_text().endswith("with Rui.\n")
    search = teleton("-c", str(new_config), "memory", "search", "Porto move", home=new_home)
    assert "We planned the Porto move." in search.stdout  # the summary entry is searchable there

    again = teleton("-c", str(new_config), "memory", "import", str(export), home=new_home)
    # Nothing was new, and the count says so (the summary entry included).
    assert again.stdout.strip() == "nothing new: 5 already known (3 facts, 1 entry, 1 file)", again.stdout
    assert len(_facts(new_home, new_config)) == 2  # nothing doubled


def test_a_bad_export_file_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    home, config = _home(tmp_path, "h")
    broken = tmp_path / "broken.json"
    broken.write_text('{"format": "teleton-memory", "version": 1, "facts": [')
    proc = teleton("-c", str(config), "memory", "import", str(broken), home=home)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr + proc.stdout
    assert proc.stdout.strip().startswith("error: cannot read") and len(proc.stdout.strip().splitlines()) == 1

    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"facts": []}))
    proc = teleton("-c", str(config), "memory", "import", str(foreign), home=home)
    assert proc.returncode == 1 and "not a Teleton memory export" in proc.stdout

    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps({
        "format": "teleton-memory", "version": 1, "entries": [],
        "facts": [{"id": 1, "value": "x", "scope": "root", "category": "c"}],
        "files": {"../../escaped.md": "pwned", "memory/ok.md": "fine", "memory/run.sh": "rm -rf /"},
    }))  # fmt: skip
    proc = teleton("-c", str(config), "memory", "import", str(hostile), home=home)
    assert proc.returncode == 0, proc.stderr
    assert "imported 0 facts, 0 entries, 1 file;" in proc.stdout and "refused: 3" in proc.stdout
    assert not (home / ".teleton" / "escaped.md").exists() and not (home / "escaped.md").exists()
    assert (home / ".teleton" / "workspace" / "memory" / "ok.md").read_text() == "fine"
    assert not (home / ".teleton" / "workspace" / "memory" / "run.sh").exists()


def test_facts_as_json_name_the_messages_each_was_drawn_from_and_keep_them_through_a_move(tmp_path: Path) -> None:
    home, config = _home(tmp_path, "sources")

    async def seed() -> None:
        db = await Database.open(home / ".teleton" / "teleton.db")
        try:
            fact = await FactStore(db).save(Fact("Olga's cat is Whiskerino", category="pet", subject="owner"))
            await db.write(lambda conn: link(conn, fact.id, 4242, [17, 18]))
            await FactStore(db).save(Fact("Olga likes tea", category="food", subject="owner"))  # no source known
        finally:
            await db.close()

    asyncio.run(seed())
    shown = {f["value"]: f["sources"] for f in _facts(home, config)}
    assert shown == {
        "Olga's cat is Whiskerino": [{"chat_id": 4242, "message_id": 17}, {"chat_id": 4242, "message_id": 18}],
        "Olga likes tea": [],
    }
    # Export and import carry the links (ids only): once the archive is downloaded again on the new machine,
    # where its messages keep their ids, the facts lift and forget with them as before.
    export = tmp_path / "memory.json"
    assert teleton("-c", str(config), "memory", "export", str(export), home=home).returncode == 0
    data = json.loads(export.read_text())
    data["facts"][0]["sources"] += [["4242", 19], [4242], [True, 20], "junk", None]  # a hand-edited file's
    export.write_text(json.dumps(data))
    new_home, new_config = _home(tmp_path, "moved")
    proc = teleton("-c", str(new_config), "memory", "import", str(export), home=new_home)
    assert proc.returncode == 0, proc.stderr
    assert {f["value"]: f["sources"] for f in _facts(new_home, new_config)} == shown
