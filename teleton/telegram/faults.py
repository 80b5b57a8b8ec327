"""Which Telegram errors end the daemon and which are weather (docs/operations.md, supervision).

Fatal: the account or the session is gone for good — retrying only hammers Telegram and hides the
problem. The daemon stops with this one line and a non-zero exit, so systemd and the operator see it.
Everything else (dropped connections, FloodWait, Telethon giving up on a read, timeouts) is retried.
"""

from __future__ import annotations

import asyncio

from telethon import errors

from teleton.gateway.contract import GatewayError

_FATAL: tuple[tuple[type[BaseException], str], ...] = (
    (errors.SessionRevokedError, "the Telegram session was revoked (logged out from another device)"),
    (errors.SessionExpiredError, "the Telegram session expired"),
    (errors.AuthKeyUnregisteredError, "the Telegram session is no longer registered"),
    (errors.AuthKeyDuplicatedError, "the Telegram session is in use elsewhere (duplicated auth key)"),
    (errors.UserDeactivatedBanError, "the Telegram account is banned"),
    (errors.UserDeactivatedError, "the Telegram account was deleted or deactivated"),
    (errors.PhoneNumberBannedError, "the phone number is banned from Telegram"),
    (errors.AccessTokenInvalidError, "the bot token is invalid (deleted at @BotFather?)"),
    (errors.AccessTokenExpiredError, "the bot token was revoked at @BotFather"),
    (errors.UnauthorizedError, "Telegram refused the session"),
)
FIX = "run `teleton setup` to log in again"


class NotLoggedIn(GatewayError):
    """The session file holds no login."""


def fatal_reason(exc: BaseException) -> str | None:
    """A one-line reason when ``exc`` means Telegram will never take this session again, else None."""
    if isinstance(exc, NotLoggedIn):
        return f"{exc}; {FIX}"
    for kind, reason in _FATAL:
        if isinstance(exc, kind):
            return f"{reason}; {FIX}"
    return None


def describe(exc: BaseException) -> str:
    """What ``teleton status`` says about a Telegram error: words, not Telethon's internals ("95 bytes read
    on a total of 1347703872 expected bytes" is a connection that broke)."""
    if isinstance(exc, errors.FloodWaitError):
        return f"Telegram asked to wait {exc.seconds} s (FloodWaitError)"
    if isinstance(exc, OSError | asyncio.IncompleteReadError):  # ConnectionError and TimeoutError are OSErrors
        return f"could not reach Telegram ({type(exc).__name__})"
    return f"{type(exc).__name__}: {exc}"[:300]
