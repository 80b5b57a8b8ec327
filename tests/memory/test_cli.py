"""`teleton memory index|search|stats` on a real workspace and database."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from teleton.cli.main import app


def test_index_search_stats(tmp_path: Path, isolated_home: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Me\n\nI like green tea.\n\n## Work\n\nTeleton ships in March.\n")
    (ws / "memory" / "pets.md").write_text("# Pets\n\nThe cat is called Miso.\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"storage:\n  data_dir: {tmp_path / 'data'}\n  workspace: {ws}\n")
    runner = CliRunner()

    first = runner.invoke(app, ["-c", str(config), "memory", "index"])
    assert first.exit_code == 0, first.output
    assert "3 added, 0 updated, 0 removed, 0 unchanged" in first.output
    again = runner.invoke(app, ["-c", str(config), "memory", "index"])
    assert "0 added, 0 updated, 0 removed, 3 unchanged" in again.output

    found = runner.invoke(app, ["-c", str(config), "memory", "search", 'what is the cat called? "Miso*', "--json"])
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)
    assert hits[0]["text"].endswith("The cat is called Miso.")
    assert hits[0]["meta"]["path"] == "memory/pets.md" and hits[0]["score"] > 0.15

    table = runner.invoke(app, ["-c", str(config), "memory", "search", "when does Teleton ship"])
    assert "MEMORY.md" in table.output and "March" in table.output

    stats = runner.invoke(app, ["-c", str(config), "memory", "stats", "--json"])
    numbers = json.loads(stats.output)
    assert numbers["chunks"] == 3 and numbers["files"] == 2 and numbers["pending"] == 0 and numbers["vectors"] == 3


def test_stats_without_a_database_say_so_and_create_none(tmp_path: Path, isolated_home: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"storage:\n  data_dir: {tmp_path / 'data'}\n  workspace: {tmp_path / 'ws'}\n")
    runner = CliRunner()
    for command, what in (("memory", "database"), ("feed", "archive")):
        said = runner.invoke(app, ["-c", str(config), command, "stats"])
        assert said.exit_code == 0 and said.output.startswith(f"no {what} yet at "), said.output
        as_json = runner.invoke(app, ["-c", str(config), command, "stats", "--json"])
        assert as_json.exit_code == 0 and json.loads(as_json.output) is None, as_json.output
    assert not (tmp_path / "data").exists() or not any((tmp_path / "data").iterdir())
