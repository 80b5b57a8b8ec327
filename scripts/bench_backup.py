#!/usr/bin/env python
"""Backup and restore at 100k messages: time and archive size through the real CLI, with and without the
embeddings, and encrypted with a passphrase.

    python scripts/bench_backup.py --db /tmp/bt-run.db              # a 100k database of scripts/bench_turn.py
    python scripts/bench_backup.py --db /tmp/bench-backup-100k.db   # built first (bench_turn.py --vectors) if missing
    python scripts/bench_backup.py --db /tmp/bt-run.db --runs 5 --embed-sample 4000

The database is copied (SQLite's backup API, the source is only read) into a fresh data directory with a small
workspace (MEMORY.md, a few memory/*.md notes) and a config (0600) that points ``storage.data_dir`` at it. The
copy's feed rows that have a vector are marked embedded, as the daemon leaves them (bench_turn.py writes its
random vectors without setting the flag); ``--as-is`` keeps the flags as they are.

Each run makes, for each variant (``plain``; ``no_vectors``: ``--no-vectors``; ``encrypted``:
``--passphrase-env``), ``teleton backup PATH``, ``teleton backup verify PATH`` and ``teleton restore PATH --to
DIR`` as subprocesses, timed by the wall clock (each includes the CLI's start-up, reported alone as
``cli_startup_s``; ``teleton backup`` reads its archive back before it reports, so it includes a verify). The
restored database is checked: its message count against the source's and ``pragma integrity_check``. For the
archive without embeddings: how many messages the next start has to embed again, and an estimate of how long
that takes, extrapolated from embedding ``--embed-sample`` of its messages (their index texts, context included,
as the feed embedder builds them) with the default local model. Medians over ``--runs`` (the machine is noisy).

Reports JSON on stdout (logs go to stderr). Everything stays on this machine; the temporary folders are removed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from teleton.config.schema import EmbeddingConfig
from teleton.memory.embeddings import create_provider
from teleton.memory.feed.embedding import FeedMessage, _message, index_text, load_context
from teleton.process.logging import configure_logging
from teleton.storage.sqlite_driver import load_sqlite_vec, pick_driver
from teleton.storage.vector_tables import HALF_VECTOR_TABLE, get_meta

ROOT = Path(__file__).resolve().parents[1]
PASSPHRASE_ENV = "TELETON_BENCH_BACKUP_PASSPHRASE"
VARIANTS: dict[str, list[str]] = {
    "plain": [],
    "no_vectors": ["--no-vectors"],
    "encrypted": ["--passphrase-env", PASSPHRASE_ENV],
}
FEED_COLUMNS = "id, chat_id, sender_name, text, date, media_kind"  # teleton.memory.feed.embedding's read order
NOTES = {
    "MEMORY.md": "# Memory\n\n- Olga prefers short answers.\n- The cabin trip is in March.\n" * 20,
    "memory/people.md": "# People\n\nAnna recommended the sailing book. Alice runs the chess club.\n" * 30,
    "memory/projects.md": "# Projects\n\nThe garden: tomatoes on the south bed, watered at 7.\n" * 30,
    "memory/2026-11-30.md": "# 2026-11-30\n\nDentist moved to Tuesday 10:00. Flight to Lisbon booked.\n" * 10,
}


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def teleton_cli() -> list[str]:
    beside = Path(sys.executable).with_name("teleton")
    return [str(beside)] if beside.is_file() else [sys.executable, "-m", "teleton.cli.main"]


def run_cli(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Run ``teleton ARGS``; (wall seconds, stdout); exit on a failure with the command and its stderr."""
    command = [*teleton_cli(), *args]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        log(f"FAILED (exit {done.returncode}): {' '.join(command)}\n{done.stdout}{done.stderr}")
        raise SystemExit(1)
    return seconds, done.stdout


def connect(path: Path, *, read_only: bool = False) -> Any:
    driver = pick_driver()
    conn = driver.module.connect(f"file:{path}?mode=ro" if read_only else str(path), uri=True, isolation_level=None)
    load_sqlite_vec(conn)  # vec0 tables need their module for integrity_check
    return conn


def scalar(conn: Any, sql: str, default: int | None = None) -> int | None:
    try:
        return int(conn.execute(sql).fetchone()[0])
    except Exception:  # a table this database does not have
        return default


def has_table(conn: Any, name: str) -> bool:
    return conn.execute("select 1 from sqlite_master where name = ?", (name,)).fetchone() is not None


def build_database(path: Path, messages: int) -> None:
    log(f"{path} does not exist: building {messages:,} messages with vectors (scripts/bench_turn.py)")
    command = [sys.executable, str(ROOT / "scripts" / "bench_turn.py"), "--vectors", "--db", str(path)]
    command += ["--messages", str(messages), "--turns", "5", "--warmup", "1", "--dm-turns", "2", "--floor-ms", "1e9"]
    subprocess.run(command, stdout=sys.stderr, cwd=ROOT, check=True)


def prepare(source: Path, tmp: Path, as_is: bool) -> tuple[Path, dict[str, Any]]:
    """The data directory, workspace and config in ``tmp``; the config's path and the source's figures."""
    data = tmp / "data"
    (data / "workspace" / "memory").mkdir(parents=True, mode=0o700)
    database = data / "teleton.db"
    src = connect(source, read_only=True)
    dst = pick_driver().module.connect(str(database))
    try:
        src.backup(dst)
    finally:
        dst.close()
        src.close()
    for name, text in NOTES.items():
        (data / "workspace" / name).write_text(text)
    config = tmp / "config.yaml"
    config.write_text(f"storage:\n  data_dir: {data}\nembedding:\n  provider: none\n")
    config.chmod(0o600)
    conn = connect(database)
    try:
        marked = 0
        if not as_is and has_table(conn, HALF_VECTOR_TABLE):
            marked = conn.execute(
                f"update tg_messages set embedded = 1 where embedded = 0 and id in (select id from {HALF_VECTOR_TABLE})"
            ).rowcount
        conn.execute("pragma wal_checkpoint(truncate)")
        figures: dict[str, Any] = {
            "path": str(source),
            "messages": scalar(conn, "select count(*) from tg_messages"),
            "feed_vectors": scalar(conn, f"select count(*) from {HALF_VECTOR_TABLE}", 0),
            "messages_not_embedded": scalar(conn, "select count(*) from tg_messages where embedded = 0"),
            "marked_embedded": marked,
            "embedding_model": get_meta(conn, "embedding_model"),
        }
        with contextlib.suppress(Exception):  # dbstat is a compile-time option
            figures["feed_vector_bytes"] = scalar(
                conn, f"select sum(pgsize) from dbstat where name = '{HALF_VECTOR_TABLE}'"
            )
    finally:
        conn.close()
    figures["db_bytes"] = database.stat().st_size
    workspace = data / "workspace"
    figures["workspace_bytes"] = sum(p.stat().st_size for p in workspace.rglob("*") if p.is_file())
    return config, figures


def check_restored(folder: Path, messages: int) -> dict[str, Any]:
    database = folder / "teleton.db"
    conn = connect(database, read_only=True)
    try:
        count = scalar(conn, "select count(*) from tg_messages")
        integrity = [row[0] for row in conn.execute("pragma integrity_check")]
        result = {
            "messages": count,
            "messages_match": count == messages,
            "integrity": "ok" if integrity == ["ok"] else "; ".join(map(str, integrity[:5])),
            "messages_to_embed": scalar(conn, "select count(*) from tg_messages where embedded = 0"),
            "feed_vectors": scalar(conn, f"select count(*) from {HALF_VECTOR_TABLE}", 0),
            "other_rows_to_embed": {
                table: scalar(conn, f"select count(*) from {table} where embedded = 0")
                for table in ("knowledge", "facts", "tool_index")
            },
            "workspace_files": sum(1 for p in (folder / "workspace").rglob("*") if p.is_file()),
        }
    finally:
        conn.close()
    result["db_bytes"] = database.stat().st_size
    return result


def sample_index_texts(database: Path, count: int) -> list[str]:
    """The index texts (context included) of ``count`` pending messages spread over the whole archive."""
    conn = connect(database, read_only=True)
    try:
        ids = [int(row[0]) for row in conn.execute("select id from tg_messages where embedded = 0 order by id")]
        chosen = sorted(random.Random(7).sample(ids, min(count, len(ids))))
        texts = []
        for row_id in chosen:
            row = conn.execute(f"select {FEED_COLUMNS} from tg_messages where id = ?", (row_id,)).fetchone()
            message: FeedMessage = _message(row)
            texts.append(index_text(message, load_context(conn, message)))
        return texts
    finally:
        conn.close()


async def embed_rate(texts: list[str], runs: int) -> dict[str, Any]:
    config = EmbeddingConfig()
    provider = await asyncio.to_thread(create_provider, config)
    assert provider is not None
    try:
        await provider.embed(texts[:64])  # warm-up: the first batch also builds ORT's kernels
        rates = []
        for n in range(runs):
            started = time.perf_counter()
            for start in range(0, len(texts), config.batch_size):  # embed_pending's batches
                await provider.embed(texts[start : start + config.batch_size])
            seconds = time.perf_counter() - started
            rates.append(len(texts) / seconds)
            log(f"embedding run {n + 1}/{runs}: {len(texts)} texts in {seconds:.1f} s ({rates[-1]:.1f}/s)")
        lengths: dict[str, float] = {"mean_chars": round(statistics.mean(len(t) for t in texts), 1)}
        with contextlib.suppress(Exception):  # the local embedder's tokenizer (truncated as it embeds)
            lengths["mean_tokens"] = round(statistics.mean(len(ids) for ids in provider._token_ids(texts)), 1)  # type: ignore[attr-defined]
        return {"model": provider.model_id, "batch": config.batch_size, "rates": rates, **lengths}
    finally:
        with contextlib.suppress(Exception):
            provider.close()  # type: ignore[attr-defined]


def median(values: list[float], digits: int = 2) -> float:
    return round(statistics.median(values), digits)


def bench(args: argparse.Namespace) -> dict[str, Any]:
    if not args.db.exists():
        build_database(args.db, args.build_messages)
    tmp = Path(tempfile.mkdtemp(prefix="teleton-bench-backup-"))
    try:
        config, source = prepare(args.db, tmp, args.as_is)
        log(
            f"source: {source['messages']:,} messages, {source['feed_vectors']:,} vectors, "
            f"{source['db_bytes'] / 2**20:.1f} MB (marked embedded: {source['marked_embedded']:,})"
        )
        env = {**os.environ, PASSPHRASE_ENV: args.passphrase, "NO_COLOR": "1"}
        cfg = ["-c", str(config)]
        (tmp / "archives").mkdir()
        startup: list[float] = []
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
        texts: list[str] = []
        for run in range(args.runs):
            startup.append(run_cli([*cfg, "backup", "--help"], env)[0])
            for name, flags in VARIANTS.items():
                key = flags if name == "encrypted" else []
                archive = tmp / "archives" / f"{name}-{run}.tar.gz{'.enc' if name == 'encrypted' else ''}"
                backup_s, said = run_cli([*cfg, "backup", str(archive), *flags], env)
                reported = re.search(r"verified, ([\d.]+) s\)", said)
                verify_s, _ = run_cli([*cfg, "backup", "verify", str(archive), *key], env)
                restored = tmp / "restore" / f"{name}-{run}"
                restore_s, _ = run_cli([*cfg, "restore", str(archive), "--to", str(restored), *key], env)
                check = check_restored(restored, source["messages"])
                if name == "no_vectors" and not texts:
                    texts = sample_index_texts(restored / "teleton.db", args.embed_sample)
                result = {
                    "backup_s": round(backup_s, 2),
                    "backup_reported_s": float(reported.group(1)) if reported else None,
                    "verify_s": round(verify_s, 2),
                    "restore_s": round(restore_s, 2),
                    "archive_bytes": archive.stat().st_size,
                    **{f"restored_{k}": v for k, v in check.items()},
                }
                runs[name].append(result)
                log(
                    f"run {run + 1}/{args.runs} {name}: backup {backup_s:.1f} s, verify {verify_s:.1f} s, "
                    f"restore {restore_s:.1f} s, {result['archive_bytes'] / 2**20:.1f} MB, "
                    f"{check['messages']:,} messages ({'match' if check['messages_match'] else 'MISMATCH'}), "
                    f"integrity {check['integrity']}"
                )
                shutil.rmtree(restored)
                archive.unlink()
        report: dict[str, Any] = {
            "source": source,
            "runs": args.runs,
            "cli_startup_s": median(startup),
            "variants": {},
        }
        for name, results in runs.items():
            last = results[-1]
            size = median([r["archive_bytes"] for r in results], 0)
            report["variants"][name] = {
                "flags": VARIANTS[name],
                "backup_s": median([r["backup_s"] for r in results]),
                "backup_reported_s": median([r["backup_reported_s"] or 0.0 for r in results]),
                "verify_s": median([r["verify_s"] for r in results]),
                "restore_s": median([r["restore_s"] for r in results]),
                "archive_bytes": int(size),
                "archive_mb": round(size / 2**20, 1),
                "archive_ratio": round(size / source["db_bytes"], 3),
                "restored_db_bytes": last["restored_db_bytes"],
                "restored_messages": last["restored_messages"],
                "messages_match": all(r["restored_messages_match"] for r in results),
                "integrity_ok": all(r["restored_integrity"] == "ok" for r in results),
                "restored_feed_vectors": last["restored_feed_vectors"],
                "messages_to_embed": last["restored_messages_to_embed"],
                "other_rows_to_embed": last["restored_other_rows_to_embed"],
                "restored_workspace_files": last["restored_workspace_files"],
                "per_run": [{k: r[k] for k in ("backup_s", "verify_s", "restore_s", "archive_bytes")} for r in results],
            }
        pending = report["variants"]["no_vectors"]["messages_to_embed"] or 0
        if texts:
            log(f"embedding {len(texts):,} index texts with the default local model, {args.runs} runs")
            rate = asyncio.run(embed_rate(texts, args.runs))
            per_s = statistics.median(rate["rates"])
            report["variants"]["no_vectors"]["rebuild_estimate"] = {
                "extrapolated": True,
                "how": (
                    f"median rate of embedding {len(texts)} of the restored archive's pending messages (index texts "
                    f"with context, batches of {rate['batch']}) with create_provider(EmbeddingConfig()), times "
                    f"{pending} messages; the model only: the vector writes and other daemon work are not included"
                ),
                "model": rate["model"],
                "sample": len(texts),
                "sample_mean_chars": rate["mean_chars"],
                "sample_mean_tokens": rate.get("mean_tokens"),
                "texts_per_s": round(per_s, 1),
                "texts_per_s_runs": [round(r, 1) for r in rate["rates"]],
                "messages": pending,
                "seconds": round(pending / per_s),
                "minutes": round(pending / per_s / 60, 1),
            }
        report["notes"] = [
            "times are the wall clock of `teleton ...` as a subprocess, the CLI start-up (cli_startup_s) included",
            "`teleton backup` reads the archive back (a verify) before it reports: backup_s includes it; "
            "backup_reported_s is the CLI's own figure (start-up excluded)",
            f"machine: {os.cpu_count()} cores; medians of {args.runs} runs, variants interleaved in each run",
        ]
        return report
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a 100k-message database (built here if missing)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--embed-sample", type=int, default=2_000, help="messages embedded for the rebuild estimate")
    parser.add_argument("--build-messages", type=int, default=100_000, help="messages when --db has to be built")
    parser.add_argument("--passphrase", default="correct horse battery staple", help="for the encrypted variant")
    parser.add_argument("--as-is", action="store_true", help="keep the copy's embedded flags as the source has them")
    args = parser.parse_args()
    configure_logging("warning", "console", stream=sys.stderr)  # stdout carries the results only
    print(json.dumps(bench(args), indent=2))


if __name__ == "__main__":
    main()
