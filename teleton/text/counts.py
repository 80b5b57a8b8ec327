"""A count with its noun: "1 file", "2 files", "1 entry", "1,204 messages" — the one rule for every line a
person reads."""

from __future__ import annotations


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` and ``noun`` in its number (the last word takes the plural: "current fact" -> "current
    facts"; "entry" -> "entries"); ``plural`` where English does not follow the rule."""
    if count == 1:
        return f"{count:,} {noun}"
    if plural is None:
        head, _, last = noun.rpartition(" ")
        many = last[:-1] + "ies" if last.endswith("y") and last[-2:-1] not in "aeiou" else last + "s"
        plural = f"{head} {many}" if head else many
    return f"{count:,} {plural}"
