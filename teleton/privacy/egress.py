"""Egress: may a turn send to another chat, or write where others read? (DESIGN §8, "Egress").

A turn's ``Exposure`` is every label it was shown: its own chat and session, the system prompt's files,
retrieved context, every tool result. A send to the turn's own chat is never held (everything the turn saw,
that chat's clearance may read). A send to any other chat goes out only when that chat may read everything
the turn saw; otherwise ``privacy.cross_chat_sends`` decides: ``approve`` holds it for the owner, ``deny``
refuses it, ``allow`` sends it anyway (the owner's explicit choice, logged).

A write is a send to whoever reads what is written: a file put in ``public/`` (or a group's folder), a
public fact, a file moved there, reaches every reader of that label. So a write labelled for others follows
the same rule, with the readers of its label as the target (``public``: everyone, who read only public).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from teleton.privacy.labels import PUBLIC, Clearance

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

    def unreadable_by(self, target: Clearance | str) -> frozenset[str]:
        """What this turn saw that ``target`` (a clearance, or the readers of a label) may not read; empty:
        a send or a write there leaks nothing."""
        if isinstance(target, Clearance):
            return frozenset(label for label in self._labels if not target.may_read(label))
        if target == PUBLIC:  # everyone reads it, and everyone may read only public items
            return frozenset(label for label in self._labels if label != PUBLIC)
        return self.unreadable_by(Clearance(target))


def decide(mode: Mode, exposure: Exposure, target: Clearance | str, *, own_chat: bool = False) -> Verdict:
    """``target``: the receiving chat's clearance, or the label a write gets (its readers)."""
    if own_chat or not exposure.unreadable_by(target):
        return "send"
    if mode == "allow":
        return "send"
    return "hold" if mode == "approve" else "deny"
