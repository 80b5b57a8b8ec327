"""Downloads are deleted after media.retention_days; links are never followed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from teleton.media.retention import sweep_downloads


def test_old_downloads_go_and_recent_ones_and_link_targets_stay(tmp_path: Path) -> None:
    chat = tmp_path / "downloads" / "-100777"
    chat.mkdir(parents=True)
    old, new = chat / "old.jpg", chat / "new.jpg"
    old.write_bytes(b"x")
    new.write_bytes(b"y")
    month_ago = time.time() - 31 * 86_400
    os.utime(old, (month_ago, month_ago))
    precious = tmp_path / "MEMORY.md"
    precious.write_text("keep me")
    os.utime(precious, (month_ago, month_ago))
    (chat / "link.md").symlink_to(precious)
    os.utime(chat / "link.md", (month_ago, month_ago), follow_symlinks=False)

    assert sweep_downloads(tmp_path, 30) == 2  # the old file and the old link itself
    assert sorted(p.name for p in chat.iterdir()) == ["new.jpg"]
    assert precious.read_text() == "keep me" and chat.is_dir()
    assert sweep_downloads(tmp_path, 0) == 0 and new.exists()  # 0 keeps everything
    assert sweep_downloads(tmp_path / "nowhere", 30) == 0
