"""Salience decay: importance that is not used fades back toward neutral (docs/memory.md).

High-importance facts surface in DM context unasked; without decay, a fact rated 0.9 once would sit in every
prompt forever. A fact that has not been recalled for a while drifts toward 0.5 with a half-life, so what is
used stays salient and what is not makes room. Facts at or above ``PINNED`` ("never forget": allergies,
explicit "remember this") never decay, and a fact is never pushed below neutral by decay.
"""

from __future__ import annotations

from teleton.storage.sqlite_driver import Connection

NEUTRAL = 0.5
PINNED = 0.95


def decay_salience(conn: Connection, now: float, elapsed_s: float, half_life_days: float) -> int:
    """Apply ``elapsed_s`` of decay to facts unused for at least one half-life; return how many changed."""
    if elapsed_s <= 0:
        return 0
    factor = 0.5 ** (elapsed_s / (half_life_days * 86400))
    stale_before = now - half_life_days * 86400
    cur = conn.execute(
        "update facts set importance = ? + (importance - ?) * ? "
        "where importance > ? and importance < ? and coalesce(last_access, updated_at) < ?",
        (NEUTRAL, NEUTRAL, factor, NEUTRAL + 1e-6, PINNED, stale_before),
    )
    return int(cur.rowcount)
