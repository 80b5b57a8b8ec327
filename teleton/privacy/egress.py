"""Egress: one decision for every way out of a turn (docs/privacy.md, "Egress").

A way out is anything that leaves the turn's own label: a send elsewhere, a publish, a move across labels, a
fetch, an outside server's tool, ``exec``. ``decide`` weighs it against the turn's ``Taint`` (the labels it
was shown, and the outside origins that may have steered it) and ``privacy.cross_chat_sends`` (approve, deny,
allow). Pure and table-tested (tests/labels/test_egress_table.py); the table: docs/privacy.md, "The ways out
and their rule".
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from teleton.privacy.labels import OWNER, PUBLIC, Clearance
from teleton.privacy.quoting import origins_in

Mode = Literal["approve", "deny", "allow"]
Verdict = Literal["allow", "hold", "deny"]
MODES: tuple[Mode, ...] = ("approve", "deny", "allow")

Kind = Literal[
    "message", "forward", "edit", "reaction", "poll", "file",  # into a chat
    "write", "move", "fact", "document",  # published: read by whoever reads the label
    "fetch", "outside_tool",  # to a server outside
    "exec",  # a shell on this machine
]  # fmt: skip
CHAT_KINDS: tuple[Kind, ...] = ("message", "forward", "edit", "reaction", "poll", "file")
PUBLISH_KINDS: tuple[Kind, ...] = ("write", "move", "fact", "document")
OUTSIDE_KINDS: tuple[Kind, ...] = ("fetch", "outside_tool")
KINDS: tuple[Kind, ...] = (*CHAT_KINDS, *PUBLISH_KINDS, *OUTSIDE_KINDS, "exec")

OUTSIDE = "outside"  # the readers of a fetch or an outside tool: anyone, who may read only public items
SHELL = "shell"  # exec: a shell reads and reaches everything the daemon can


class Taint:
    """What one turn was shown (``labels``) and the outside content among it (``origins``); only grows."""

    def __init__(self, labels: Iterable[str] = (), origins: Iterable[str] = ()) -> None:
        self._labels: set[str] = set(labels)
        self._origins: set[str] = set(origins)

    def add(self, *labels: str) -> None:
        self._labels.update(labels)

    def saw(self, *origins: str) -> None:
        """Outside content was shown: ``web:<host>``, ``document:<name>``, ``forward:<from>``, ``exec``, …"""
        self._origins.update(origins)

    def absorb(self, text: str) -> None:
        """``text`` is being shown: every origin quoted in it counts as seen (``quoting.origins_in``)."""
        labels, origins = origins_in(text)
        self._labels.update(labels)
        self._origins.update(origins)

    def merge(self, other: Taint) -> None:
        self._labels.update(other.labels)
        self._origins.update(other.origins)

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(self._labels)

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(self._origins)

    def unreadable_by(self, target: Clearance | str) -> frozenset[str]:
        """What this turn saw that ``target`` (a clearance, the readers of a label, or ``OUTSIDE``) may not
        read; empty: a send or a write there leaks nothing."""
        if isinstance(target, Clearance):
            return frozenset(label for label in self._labels if not target.may_read(label))
        if target in (PUBLIC, OUTSIDE):  # everyone reads it, and everyone may read only public items
            return frozenset(label for label in self._labels if label != PUBLIC)
        return self.unreadable_by(Clearance(target))

    def steering(self, own: str) -> frozenset[str]:
        """What may have steered a turn of clearance ``own``: other labels' words and outside content."""
        return frozenset(self._labels - {own, PUBLIC}) | frozenset(self._origins)

    def to_json(self) -> str:
        return json.dumps({"labels": sorted(self._labels), "origins": sorted(self._origins)})

    @classmethod
    def from_json(cls, text: str | None) -> Taint:
        """A stored taint; anything unreadable counts as having seen the owner's memory (never as clean)."""
        try:
            data = json.loads(text or "{}")
            return cls(map(str, data.get("labels", ())), map(str, data.get("origins", ())))
        except (ValueError, TypeError, AttributeError):
            return cls([OWNER], ["unreadable taint"])


@dataclass(frozen=True)
class Way:
    """One way out. ``to``: the receiving chat's clearance (chat kinds), the label the item gets (publish
    kinds: its readers), ``OUTSIDE`` or ``SHELL``."""

    kind: Kind
    to: Clearance | str
    own: bool = False  # chat kinds: the turn's own chat
    typed: bool = False  # fetch, outside tool, exec: the payload is exactly what the speaker typed


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    why: str  # one line, for the model and the owner's notice
    unreadable: frozenset[str] = frozenset()  # what the turn saw that the destination may not read
    steering: frozenset[str] = frozenset()  # what may have steered the turn


def decide(mode: Mode, taint: Taint, own: str, way: Way) -> Decision:
    """The verdict for ``way`` out of a turn of clearance label ``own`` that was shown ``taint``."""
    steering = taint.steering(own)
    if way.kind in CHAT_KINDS or way.kind in PUBLISH_KINDS:
        if way.own or (way.kind in PUBLISH_KINDS and way.to == own):
            return Decision("allow", "its own chat", steering=steering)
        unreadable = taint.unreadable_by(way.to)
        if not unreadable:
            return Decision("allow", "they may read everything this conversation saw", steering=steering)
        why = f"{_readers(way.to)} may not read what this conversation saw: {', '.join(sorted(unreadable))}"
        return _by_mode(mode, why, unreadable, steering)
    if way.kind == "exec" and own != OWNER:
        return Decision("deny", "commands run only for the owner, in the owner's own chat", steering=steering)
    if way.typed:
        return Decision("allow", "exactly what was typed in this message", steering=steering)
    if not steering:
        return Decision("allow", "nothing but this chat's own words steered this conversation")
    unreadable = taint.unreadable_by(OUTSIDE) if way.kind in OUTSIDE_KINDS else frozenset()
    why = f"this conversation was shown words from elsewhere that may steer it: {', '.join(sorted(steering))}"
    return _by_mode(mode, why, unreadable, steering)


_VERDICTS: dict[Mode, Verdict] = {"approve": "hold", "deny": "deny", "allow": "allow"}


def _by_mode(mode: Mode, why: str, unreadable: frozenset[str], steering: frozenset[str]) -> Decision:
    return Decision(_VERDICTS[mode], why, unreadable, steering)


def _readers(to: Clearance | str) -> str:
    label = to.label if isinstance(to, Clearance) else to
    if label == PUBLIC:
        return "everyone"
    # Never "(chat:…)": a label in parentheses is a quoted origin (``quoting.origins_in``), not a name.
    kind = "the owner" if label == OWNER else "that person" if label.startswith("user:") else "that group"
    return f"{kind}, {label},"
