"""/forget is no oracle (issue 29, docs/privacy.md): through the real daemon, Bob (an allowlisted DM user, not the
owner) guesses prefixes of the owner's secrets with ``/forget`` and with the ``memory_forget`` tool, and
every answer is byte-identical to the one for a random string that exists nowhere: first with nothing of his
own holding them, then with all of them planted in one message of his (found, and reported the same way for
each). His own secrets are found and reported; the owner's /forget still finds the owner's copies.

One daemon of its own per provider (the owner's and Bob's seeding of conftest, nothing else).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.fakes.openai_view import PROVIDERS
from tests.privacy.obedient_model import call
from tests.privacy.oracles import S_BOBDM, S_BOBFACT, S_DAILY, S_DM, S_FACT, S_MEMORY
from tests.privacy.people import BOB, OWNER, OWNER_ID, dm
from tests.privacy.startup import running_world, seed_others, seed_owner
from tests.privacy.world import World

pytestmark = pytest.mark.costly

# Prefixes of the owner's secrets (a fact, a DM message, MEMORY.md, today's daily log), and a string that is
# nowhere: the same length and the same first two characters, since an answer names both ("“SE…” (13 …)").
OWNER_PREFIXES = [S_FACT.token[:13], S_DM.token[:13], S_MEMORY.token[:13], S_DAILY.token[:13]]
NOWHERE = "SE" + uuid.uuid4().hex[:11].upper()
GUESSES = [*OWNER_PREFIXES, NOWHERE]
FILLER = "-" * 31  # more than an excerpt shows on each side of a match: each guess is masked alike


@pytest.fixture(scope="module", params=PROVIDERS)
def forgetful(request: pytest.FixtureRequest) -> Iterator[World]:
    with running_world("forget-" + request.param, provider=request.param) as world:
        world.setup.update(seed_owner(world))
        world.setup.update(seed_others(world))
        yield world


def forget(world: World, args: str, sender: dict = BOB) -> str:
    """The daemon's one answer to ``/forget <args>`` in the sender's DM."""
    step = world.step(dm(sender), f"/forget {args}".strip(), sender, expect="command")
    return step.texts_to(sender["id"])


def test_guessed_prefixes_of_owner_secrets_answer_like_a_string_that_is_nowhere(forgetful: World) -> None:
    assert len({len(g) for g in GUESSES}) == 1 and len({g[:2] for g in GUESSES}) == 1
    answers = {guess: forget(forgetful, guess) for guess in GUESSES}
    assert set(answers.values()) == {"I found nothing to forget for “SE…” (13 characters)."}, answers
    assert forget(forgetful, "cancel") == "Nothing to cancel."


def test_guesses_planted_in_bobs_own_message_are_all_found_alike(forgetful: World) -> None:
    """The attack of issue 29: Bob's own message holds every guess, so each /forget finds it; what else
    holds a guess (MEMORY.md, the owner's daily log and its index) shows nowhere."""
    planted = FILLER + FILLER.join(GUESSES[-3:]) + FILLER  # a daily-log line keeps 200 characters of it
    assert len(planted) <= 200
    forgetful.step(dm(BOB), planted, BOB)
    # The answers to come are archived in his DM too, after the rows holding the guesses; as command replies
    # they are set aside with no keyword row or vector (archive.mark_service), so none carries a guess and
    # each /forget finds exactly what the one before it found.
    assert forget(forgetful, "cancel") == "Nothing to cancel."
    answers = {guess: forget(forgetful, guess) for guess in GUESSES[-3:]}
    (answer,) = set(answers.values())
    assert answer.startswith("Found “SE…” (13 characters) in:\n"), answer
    for line in (
        "- archived messages (with their keyword rows and vectors): 2\n",  # his message, the model's echo
        "- lines of daily logs: 1\n",
        "- conversations and their summaries (scrubbed to [forgotten]): 1\n",
        f"- archive: …{FILLER[:30]}░░░{FILLER[:30]}…\n",
        "Send /forget confirm within 5 minutes to erase all of it, or /forget cancel.",
    ):
        assert line in answer, line
    assert "knowledge chunks" not in answer and "cached embeddings" not in answer
    assert "later messages whose index carried it" not in answer  # the command exchanges carry nothing
    assert forget(forgetful, "cancel") == "Cancelled: nothing was erased."


def test_bobs_own_secrets_are_found_and_erased(forgetful: World) -> None:
    found = forget(forgetful, S_BOBDM.token)
    assert "archived messages (with their keyword rows and vectors): " in found and "/forget confirm" in found
    assert S_BOBDM.token not in found  # masked: the answer is archived, it must not be a new copy
    assert forget(forgetful, "cancel") == "Cancelled: nothing was erased."
    assert forget(forgetful, "confirm") == "Nothing to confirm: send /forget <text> first (a request lasts 5 minutes)."

    found = forget(forgetful, S_BOBFACT.token)
    assert "- facts (current and past): 1\n" in found, found
    report = forget(forgetful, "confirm")
    assert report.startswith("Forgotten:\n") and "- facts (current and past): 1\n" in report, report
    # Nothing that is not his to count, and no word on what the rest of the database file holds.
    assert "vectors:" not in report and "cached embeddings" not in report and "database file" not in report
    assert not forgetful.rows("select id from facts where instr(value, ?)", (S_BOBFACT.token,))
    assert forgetful.rows("select id from facts where instr(value, ?)", (S_FACT.token,))  # the owner's stays


def test_the_forget_tool_answers_bob_alike(forgetful: World) -> None:
    results, replies = set(), set()
    for guess in GUESSES:
        step = forgetful.step(dm(BOB), call("memory_forget", {"text": guess}), BOB)
        record = step.only("memory_forget")
        assert record.is_error
        results.add(record.content)
        replies.add(step.texts_to(BOB["id"]))
    assert len(results) == 1 and len(replies) == 1, (results, replies)


def test_the_owner_still_finds_the_owners_copies(forgetful: World) -> None:
    found = forget(forgetful, S_DAILY.token[:13], OWNER)
    for line in ("- lines of daily logs: ", "- knowledge chunks: "):
        assert line in found, found
    found = forget(forgetful, S_DM.token, OWNER)
    assert "- archived messages (with their keyword rows and vectors): " in found, found
    assert forget(forgetful, "cancel", OWNER) == "Cancelled: nothing was erased."
    assert forgetful.rows("select id from tg_messages where chat_id = ? and instr(text, ?)", (OWNER_ID, S_DM.token))


def test_forget_world_audit(forgetful: World) -> None:
    problems = forgetful.audit()
    assert not problems, "\n".join(problems)
