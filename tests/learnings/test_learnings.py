"""Learnings files: deduplicated errors with counts, corrections, caps, and the prompt block."""

from __future__ import annotations

from pathlib import Path

from teleton.memory.journal.learnings import CORRECTIONS_FILE, ERRORS_FILE, MAX_ENTRIES, Learnings


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


async def test_repeated_error_is_one_line_with_count_and_last_day(tmp_path: Path) -> None:
    clock = Clock(1_700_000_000)
    learnings = Learnings(tmp_path, clock=clock)
    await learnings.record_error("web_fetch", '{"url": "http://10.0.0.1/"}', "refused: private address 10.0.0.1")
    clock.t += 3 * 86400
    await learnings.record_error("web_fetch", '{"url": "http://10.0.0.2/"}', "refused: private address 10.0.0.2")
    await learnings.record_error("send_message", '{"chat_id": 5}', "chat not found")
    text = (tmp_path / ERRORS_FILE).read_text()
    lines = [x for x in text.splitlines() if x.startswith("- ")]
    assert len(lines) == 2
    fetch = next(x for x in lines if "web_fetch" in x)
    assert "seen 2x" in fetch and "2023-11-17" in fetch and "10.0.0.2" in fetch


async def test_errors_are_capped_keeping_the_newest(tmp_path: Path) -> None:
    clock = Clock(1_700_000_000)
    learnings = Learnings(tmp_path, clock=clock)
    for i in range(MAX_ENTRIES + 10):
        clock.t += 86400
        await learnings.record_error(f"tool_{i}", "{}", f"failure kind {chr(65 + i % 26)}{i}")
    lines = [x for x in (tmp_path / ERRORS_FILE).read_text().splitlines() if x.startswith("- ")]
    assert len(lines) == MAX_ENTRIES
    assert any(f"tool_{MAX_ENTRIES + 9}" in x for x in lines)
    assert not any("`tool_0`" in x for x in lines)


async def test_corrections_dedup_and_appear_in_prompt_block(tmp_path: Path) -> None:
    learnings = Learnings(tmp_path, clock=Clock(1_700_000_000))
    assert await learnings.for_prompt() == ""
    assert await learnings.record_correction("My sister is called Ana, not Anna.")
    assert not await learnings.record_correction("my sister is called ana, not anna.")
    await learnings.record_error("web_fetch", "{}", "timeout after 20 s")
    block = await learnings.for_prompt()
    assert "Corrections from the owner" in block and "Ana, not Anna" in block
    assert "Past tool errors" in block and "timeout after 20 s" in block
    assert (tmp_path / CORRECTIONS_FILE).read_text().count("Ana") == 1


async def test_hand_edited_file_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / ERRORS_FILE
    path.parent.mkdir(parents=True)
    path.write_text("# my notes\nsomething the owner wrote\n- `exec` ls -> denied (seen 4x, last 2023-01-01)\n")
    learnings = Learnings(tmp_path, clock=Clock(1_700_000_000))
    await learnings.record_error("exec", "ls -la", "denied")
    text = path.read_text()
    assert "seen 5x" in text
    block = await learnings.for_prompt(max_chars=40)
    assert len(block) <= 40
