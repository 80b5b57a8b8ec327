"""Egress: may a turn send to another chat? (DESIGN §8, "Egress").

A turn's ``Exposure`` is every label it was shown: its own chat and session, the system prompt's files,
retrieved context, every tool result. A send to the turn's own chat is never held (everything the turn saw,
that chat's clearance may read). A send to any other chat goes out only when that chat may read everything
the turn saw; otherwise ``privacy.cross_chat_sends`` decides: ``approve`` holds it for the owner, ``deny``
refuses it, ``allow`` sends it anyway (the owner's explicit choice, logged).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from teleton.privacy.labels import Clearance

Mode = Literal["approve", "deny", "allow"]
Verdict = Literal["send", "hold", "deny"]
MODES: tuple[Mode, ...] = ("approve", "deny", "allow")


class Exposure:
    """The labels one turn has been shown; only grows."""

    def __init__(self, labels: Iterable[str] = ()) -> None:
        self._labels: set[str] = set(labels)

    def add(self, *labels: str) -> None:
        self._labels.update(labels)

    @property
    def labels(self) -> frozenset[str]:
        return frozenset(self._labels)

    def unreadable_by(self, target: Clearance) -> frozenset[str]:
        """What this turn saw that ``target`` may not read (empty: a send there leaks nothing)."""
        return frozenset(label for label in self._labels if not target.may_read(label))


def decide(mode: Mode, exposure: Exposure, target: Clearance, *, own_chat: bool) -> Verdict:
    if own_chat or not exposure.unreadable_by(target):
        return "send"
    if mode == "allow":
        return "send"
    return "hold" if mode == "approve" else "deny"
