"""The privacy rules as a table (docs/privacy.md): every (clearance, label) pair, path labels, the egress verdict."""

from __future__ import annotations

import pytest

from teleton.privacy import OWNER, PUBLIC, Clearance, Principals, Taint, decide, is_label, path_label
from teleton.privacy.egress import Way

OWNER_ID, BOB, ADA, GROUP, OTHER_GROUP = 1001, 2002, 3003, -100500, -100600
P = Principals(owner_id=OWNER_ID, admin_ids=frozenset({BOB}), owner_chats=frozenset({1}))

CLEARANCES = {
    "owner": Clearance(OWNER),
    "bob (an admin)": Clearance(f"user:{BOB}"),
    "ada": Clearance(f"user:{ADA}"),
    "group": Clearance(f"chat:{GROUP}"),
}
LABELS = [OWNER, PUBLIC, f"user:{BOB}", f"user:{ADA}", f"chat:{GROUP}", f"chat:{OTHER_GROUP}"]
MALFORMED = ["", "user", "global", "chat:", "user:abc", "chat:1 or 1", "OWNER", " owner", "user:-5", "user:0", None, 7]

# Who reads what: owner everything; anyone else public and their own label, nothing more.
READS = {
    "owner": set(LABELS),
    "bob (an admin)": {PUBLIC, f"user:{BOB}"},
    "ada": {PUBLIC, f"user:{ADA}"},
    "group": {PUBLIC, f"chat:{GROUP}"},
}


@pytest.mark.parametrize("who", list(CLEARANCES))
@pytest.mark.parametrize("label", LABELS)
def test_read_rule_for_every_pair(who: str, label: str) -> None:
    assert CLEARANCES[who].may_read(label) is (label in READS[who])


@pytest.mark.parametrize("who", list(CLEARANCES))
@pytest.mark.parametrize("label", MALFORMED, ids=repr)
def test_an_unknown_label_is_readable_by_nobody(who: str, label: object) -> None:
    assert not is_label(label)
    assert not CLEARANCES[who].may_read(label)


def test_sql_forms_agree_with_the_rule() -> None:
    for who, clearance in CLEARANCES.items():
        readable = clearance.readable()
        if who == "owner":
            assert readable is None and clearance.readable_chats() is None
            continue
        assert readable is not None and set(readable) == READS[who]
        assert clearance.readable_chats() == (int(clearance.label.split(":")[1]),)


def test_the_chat_decides_the_clearance_not_the_speaker() -> None:
    assert P.clearance(OWNER_ID) == Clearance(OWNER)  # the owner's DM
    assert P.clearance(1) == Clearance(OWNER)  # the terminal of `teleton chat`
    assert P.clearance(BOB) == Clearance(f"user:{BOB}")  # an admin's DM reads only Bob's things
    assert P.clearance(GROUP) == Clearance(f"chat:{GROUP}")  # the owner speaking in a group too
    assert P.is_admin(BOB) and P.is_admin(OWNER_ID) and not P.is_admin(ADA) and not P.is_admin(None)
    assert P.notice_chat() == 1  # held sends are announced in the terminal when there is one
    with pytest.raises(ValueError):
        Clearance(PUBLIC)  # public is a label, never a turn's clearance
    with pytest.raises(ValueError):
        Clearance("global")


def test_principals_change_in_place() -> None:
    p = Principals(owner_id=OWNER_ID)
    held = p  # every holder keeps this object
    p.update(ADA, [BOB])
    assert held.clearance(ADA).is_owner and not held.clearance(OWNER_ID).is_owner
    assert held.is_admin(BOB) and held.notice_chat() == ADA


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("public/faq.md", PUBLIC),
        ("public/docs/deep/guide.md", PUBLIC),
        ("SOUL.md", PUBLIC),
        ("IDENTITY.md", PUBLIC),
        ("SECURITY.md", PUBLIC),
        ("MEMORY.md", OWNER),
        ("USER.md", OWNER),
        ("STRATEGY.md", OWNER),
        ("HEARTBEAT.md", OWNER),
        ("memory/2026-11-22.md", OWNER),
        ("learnings/errors.md", OWNER),
        ("learnings/corrections.md", OWNER),
        ("notes.txt", OWNER),  # default-deny: nobody classified it
        ("some/new/folder/x.md", OWNER),
        ("memory/SOUL.md", OWNER),  # a persona name only counts at the root
        (f"downloads/{GROUP}/photo.jpg", f"chat:{GROUP}"),
        (f"downloads/{BOB}/scan.pdf", f"user:{BOB}"),
        (f"downloads/{OWNER_ID}/passport.pdf", OWNER),
        (f"chats/{GROUP}/minutes.md", f"chat:{GROUP}"),
        (f"chats/{GROUP}", f"chat:{GROUP}"),
        ("downloads", OWNER),
        ("downloads/photo.jpg", OWNER),
        ("downloads/0123/x", OWNER),  # not a chat id
        ("downloads/abc/x", OWNER),
        (".", OWNER),
        ("shared/agenda.md", PUBLIC),  # privacy.shared_paths
        ("shared/private/diary.md", OWNER),  # "*" stays inside one folder
        ("other/shared/agenda.md", OWNER),  # a pattern is anchored at the workspace root
        ("shared/../MEMORY.md", OWNER),  # (callers resolve first; a literal ".." never matches a pattern)
    ],
)
def test_path_labels(path: str, label: str) -> None:
    assert path_label(path, P, shared=["shared/*.md"]) == label


def test_a_double_star_pattern_spans_folders() -> None:
    shared = ["docs/**/*.md"]
    assert [path_label(p, P, shared=shared) for p in ("docs/a.md", "docs/x/y/b.md", "docs/x/c.txt", "a.md")] == [
        PUBLIC,
        PUBLIC,
        OWNER,
        OWNER,
    ]


def _send(mode: str, labels: tuple[str, ...], own: str, to: int, own_chat: bool = False) -> str:
    way = Way("message", P.clearance(to), own=own_chat)
    return decide(mode, Taint(labels), own, way).verdict  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["approve", "deny", "allow"])
def test_egress_verdicts(mode: str) -> None:
    owner_turn = (OWNER,)
    group_turn = (f"chat:{GROUP}", PUBLIC)
    g = f"chat:{GROUP}"
    blocked = {"approve": "hold", "deny": "deny", "allow": "allow"}[mode]
    # The turn's own chat: never held, whatever it saw.
    assert _send(mode, owner_turn, OWNER, OWNER_ID, own_chat=True) == "allow"
    assert _send(mode, group_turn, g, GROUP, own_chat=True) == "allow"
    # To the owner: the owner may read everything.
    assert _send(mode, group_turn, g, OWNER_ID) == "allow"
    # The owner's turn to a group or to Bob: they may not read the owner's memory.
    assert _send(mode, owner_turn, OWNER, GROUP) == blocked
    assert _send(mode, owner_turn, OWNER, BOB) == blocked
    # A group's turn to another group or to Bob: they may not read the group.
    assert _send(mode, group_turn, g, OTHER_GROUP) == blocked
    assert _send(mode, group_turn, g, BOB) == blocked
    # A turn that saw only public things may send anywhere.
    assert _send(mode, (PUBLIC,), g, OTHER_GROUP) == "allow"
    # Seeing one more label is enough to hold it.
    mixed = (PUBLIC, f"chat:{OTHER_GROUP}")
    assert _send(mode, mixed, g, OTHER_GROUP) == "allow"
    assert _send(mode, (*mixed, f"user:{ADA}"), g, OTHER_GROUP) == blocked
    assert Taint((*mixed, f"user:{ADA}")).unreadable_by(P.clearance(OTHER_GROUP)) == {f"user:{ADA}"}
