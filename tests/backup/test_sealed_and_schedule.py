"""Encrypted archives (a wrong key, a flipped byte, a cut or lengthened file never decrypt) and the schedule
(when a backup is due, what rotation keeps) on a fake clock."""

from __future__ import annotations

import datetime as dt
import io
import os
from pathlib import Path

import pytest

from teleton.backup import schedule
from teleton.backup.sealed import CHUNK, TAG, Key, SealedReader, SealedWriter, SealError, key_from
from teleton.config.schema import BackupConfig

PASS = Key.from_passphrase("correct horse battery staple", "TEST_PASSPHRASE")


def _seal(data: bytes, key: Key = PASS) -> bytes:
    out = io.BytesIO()
    writer = SealedWriter(out, key)
    for start in range(0, len(data), 10_000):  # written in pieces, as tar and gzip do
        writer.write(data[start : start + 10_000])
    writer.close()
    return out.getvalue()


def _open(sealed: bytes, key: Key = PASS) -> bytes:
    reader = SealedReader(io.BytesIO(sealed), key)
    parts = []
    while chunk := reader.read(7_777):
        parts.append(chunk)
    return b"".join(parts)


@pytest.mark.parametrize("size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 200_003])
def test_what_is_sealed_opens_whole_with_the_key(size: int) -> None:
    data = os.urandom(size)
    sealed = _seal(data)
    assert _open(sealed) == data
    assert data[:64] not in sealed or size < 16


def test_a_key_file_seals_and_only_that_file_opens(tmp_path: Path) -> None:
    (tmp_path / "key").write_bytes(os.urandom(32))
    (tmp_path / "other").write_bytes(os.urandom(32))
    key = key_from(None, tmp_path / "key")
    assert key is not None
    sealed = _seal(b"the archive" * 1000, key)
    assert _open(sealed, Key.from_file(tmp_path / "key")) == b"the archive" * 1000
    with pytest.raises(SealError, match="wrong passphrase or key"):
        _open(sealed, Key.from_file(tmp_path / "other"))
    with pytest.raises(SealError, match="sealed with a key file, not a passphrase"):
        _open(sealed, PASS)
    (tmp_path / "short").write_bytes(b"hunter2")
    with pytest.raises(SealError, match="holds 7 bytes, at least 32"):
        Key.from_file(tmp_path / "short")


def test_a_wrong_passphrase_fails_at_once() -> None:
    sealed = _seal(os.urandom(3 * CHUNK))
    with pytest.raises(SealError, match="does not open this archive"):
        SealedReader(io.BytesIO(sealed), Key.from_passphrase("wrong", "X")).read(10)


def test_a_flipped_byte_a_cut_end_an_added_tail_or_swapped_chunks_never_decrypt() -> None:
    data = os.urandom(4 * CHUNK + 100)
    sealed = _seal(data)
    header = len(sealed) - (4 * (CHUNK + TAG) + 100 + TAG)
    flipped = bytearray(sealed)
    flipped[header + 2 * (CHUNK + TAG) + 5] ^= 1
    chunk = slice(header + CHUNK + TAG, header + 2 * (CHUNK + TAG))
    second, third = sealed[chunk], sealed[header + 2 * (CHUNK + TAG) : header + 3 * (CHUNK + TAG)]
    swapped = sealed[: chunk.start] + third + second + sealed[header + 3 * (CHUNK + TAG) :]
    at_boundary = sealed[: header + 4 * (CHUNK + TAG)]  # whole chunks, the last one missing
    for bad in (bytes(flipped), at_boundary, sealed[:-1], sealed + b"\x00" * 50, swapped):
        with pytest.raises(SealError, match="damaged or cut off near byte"):  # not mistaken for a wrong key
            _open(bad)


def test_a_header_asking_for_a_huge_key_derivation_is_refused_before_it_runs() -> None:
    sealed = _seal(b"data")
    greedy = sealed.replace(b'"memory_cost": 65536', b'"memory_cost": 99999999')
    assert greedy != sealed
    with pytest.raises(SealError, match="far costlier"):
        _open(greedy)


def test_a_passphrase_from_the_environment_and_its_absence_are_said() -> None:
    assert key_from("BK_PASS", None, {"BK_PASS": "secret words"}) == Key(b"secret words", True, "BK_PASS")
    with pytest.raises(SealError, match="BK_PASS, which is not set"):
        key_from("BK_PASS", None, {})
    with pytest.raises(SealError, match="empty"):
        key_from("BK_PASS", None, {"BK_PASS": ""})
    assert key_from(None, None, {}) is None


def _at(text: str) -> float:
    return dt.datetime.strptime(text, "%Y-%m-%d %H:%M").timestamp()


def test_a_daily_backup_is_due_once_a_day_after_its_hour_and_a_missed_one_at_the_next_start() -> None:
    daily = BackupConfig(every="daily", at="04:00")
    assert schedule.is_due(None, _at("2026-12-02 03:00"), daily)  # never backed up: the first start makes one
    made = _at("2026-12-02 04:00")
    assert not schedule.is_due(made, _at("2026-12-02 23:59"), daily)
    assert not schedule.is_due(made, _at("2026-12-03 03:59"), daily)
    assert schedule.is_due(made, _at("2026-12-03 04:00"), daily)
    assert schedule.is_due(made, _at("2026-12-05 10:00"), daily)  # down for two days: due at once
    weekly = BackupConfig(every="weekly", at="02:30")
    sunday = _at("2026-12-06 02:30")  # a Sunday
    assert dt.datetime.fromtimestamp(sunday).weekday() == 6
    assert not schedule.is_due(sunday, _at("2026-12-12 23:00"), weekly)
    assert schedule.is_due(sunday, _at("2026-12-13 02:30"), weekly)
    hourly = BackupConfig(every="hourly")
    assert not schedule.is_due(_at("2026-12-02 10:00"), _at("2026-12-02 10:59"), hourly)
    assert schedule.is_due(_at("2026-12-02 10:00"), _at("2026-12-02 11:00"), hourly)
    assert not schedule.is_due(None, _at("2026-12-02 11:00"), BackupConfig(every="off"))


def test_rotation_keeps_the_newest_of_each_of_the_last_days_and_of_the_weeks_before(tmp_path: Path) -> None:
    """Ninety days of a daily schedule, two archives on some days: what is left is 7 days and 4 weeks."""
    start = dt.datetime(2026, 9, 1, 4, 0)
    names = []
    for day in range(90):
        moment = start + dt.timedelta(days=day)
        names.append(moment.strftime("teleton-%Y%m%d-%H%M%S.tar.gz"))
        if day % 10 == 5:  # a manual backup later that day
            names.append((moment + dt.timedelta(hours=8)).strftime("teleton-%Y%m%d-%H%M%S.tar.gz.enc"))
    for name in names:
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "notes.txt").write_text("not an archive: never touched")
    paths = sorted(tmp_path.iterdir())
    removed = schedule.to_remove(paths, daily=7, weekly=4)
    kept = sorted(set(p for p in paths if p.suffix in {".gz", ".enc"}) - set(removed))
    times = [dt.datetime.fromtimestamp(schedule.archive_time(p) or 0) for p in kept]
    assert len(kept) == 11
    last_days = {t.date() for t in times[-7:]}
    assert last_days == {(start + dt.timedelta(days=d)).date() for d in range(83, 90)}
    weeks = [t.isocalendar()[:2] for t in times[:4]]
    assert len(set(weeks)) == 4 and all(w not in {d.isocalendar()[:2] for d in last_days} for w in weeks)
    assert (tmp_path / "notes.txt") not in removed
    # each kept one is the newest of its day: the manual 12:00 one where a day had two
    day85 = (start + dt.timedelta(days=85)).strftime("teleton-%Y%m%d-120000.tar.gz.enc")
    assert tmp_path / day85 not in removed and tmp_path / day85.replace("120000", "040000")[:-4] in removed
    assert schedule.to_remove(paths, daily=0, weekly=0) == sorted(
        (p for p in paths if p.name.startswith("teleton-")), key=lambda p: schedule.archive_time(p) or 0, reverse=True
    )
