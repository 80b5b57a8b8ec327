"""Privacy as information-flow control (docs/privacy.md): labels on data, clearances on turns, one set of rules.

Every read path asks ``Clearance.may_read`` (or its SQL form ``Clearance.readable``); every write takes
``Clearance.label``; every send to another chat asks ``egress.decide``. Pure code with no I/O and no
imports from the layers above it.
"""

from teleton.privacy.egress import Taint, decide
from teleton.privacy.labels import (
    OWNER,
    OWNER_CLEARANCE,
    PUBLIC,
    Clearance,
    Principals,
    chat_label,
    group_label,
    is_label,
    user_label,
)
from teleton.privacy.paths import chat_dir, path_label

__all__ = [
    "OWNER",
    "OWNER_CLEARANCE",
    "PUBLIC",
    "Clearance",
    "Principals",
    "Taint",
    "chat_dir",
    "chat_label",
    "decide",
    "group_label",
    "is_label",
    "path_label",
    "user_label",
]
