"""A message's answer state moves only as message_life.MOVES allows: the table walked on a real database."""

from __future__ import annotations

from pathlib import Path

import pytest

from teleton.memory.feed import archive as fa
from teleton.memory.feed import message_life as life
from teleton.storage import Database

# The shortest legal way to each state from how a live message is archived.
PATHS = {
    life.STATE_ARCHIVED: [],
    life.STATE_ACCEPTED: [life.STATE_ACCEPTED],
    life.STATE_SENDING: [life.STATE_ACCEPTED, life.STATE_SENDING],
    life.STATE_IGNORED: [life.STATE_IGNORED],
    life.STATE_ANSWERED: [life.STATE_ACCEPTED, life.STATE_SENDING, life.STATE_ANSWERED],
    life.STATE_FAILED: [life.STATE_ACCEPTED, life.STATE_FAILED],
}
TARGETS = sorted({to for moves in life.MOVES.values() for to in moves})


def state_of(conn, message_id: int) -> tuple[str, str | None]:
    row = conn.execute("select agent_state, agent_note from tg_messages where message_id = ?", (message_id,)).fetchone()
    return row[0], row[1]


@pytest.fixture
async def db(tmp_path: Path):
    database = await Database.open(tmp_path / "t.db")
    yield database
    await database.close()


async def test_every_move_of_the_table_is_made_and_every_other_is_refused(db: Database) -> None:
    cases = [(state, to) for state in life.MOVES for to in TARGETS]
    assert len(cases) == len(life.MOVES) * len(TARGETS) == 40

    def walk(conn) -> list[tuple[str, str, int, str]]:
        results = []
        for number, (state, to) in enumerate(cases, start=1):
            first = state if state in (life.STATE_HISTORY, life.STATE_TERMINAL) else life.STATE_ARCHIVED
            fa.insert_message(conn, fa.MessageRecord(chat_id=7, message_id=number, date=1.0), agent_state=first)
            for step in PATHS.get(state, []):
                assert life.move(conn, 7, [number], step) == 1
            assert state_of(conn, number)[0] == state
            moved = life.move(conn, 7, [number], to, note="why")
            results.append((state, to, moved, state_of(conn, number)[0]))
        return results

    for state, to, moved, now in await db.write(walk):
        if to in life.MOVES[state]:
            assert (moved, now) == (1, to), (state, to)
        else:  # refused: the message keeps its state
            assert (moved, now) == (0, state), (state, to)


async def test_a_closed_message_is_never_reopened_and_a_reply_going_out_is_never_queued_again(db: Database) -> None:
    def story(conn) -> list[tuple[str, str | None]]:
        fa.insert_message(conn, fa.MessageRecord(chat_id=7, message_id=1, date=1.0), agent_state=life.STATE_ARCHIVED)
        life.move(conn, 7, [1], life.STATE_SENDING, note="since 1")
        life.move(conn, 7, [1], life.STATE_ACCEPTED)  # a late gate verdict
        seen = [state_of(conn, 1)]
        life.move(conn, 7, [1], life.STATE_ANSWERED)
        life.move(conn, 7, [1], life.STATE_FAILED, note="replayed")
        seen.append(state_of(conn, 1))
        return seen

    assert await db.write(story) == [(life.STATE_SENDING, "since 1"), (life.STATE_ANSWERED, None)]
    assert life.OPEN_STATES == (life.STATE_ARCHIVED, life.STATE_ACCEPTED, life.STATE_SENDING)


async def test_a_move_no_state_allows_is_a_bug(db: Database) -> None:
    for to in (life.STATE_ARCHIVED, life.STATE_HISTORY, life.STATE_TERMINAL, "replied"):
        with pytest.raises(ValueError, match="no message may move to"):
            await db.write(lambda conn, t=to: life.move(conn, 7, [1], t))
