"""Logging in to Telegram: phone code (retried when mistyped), 2FA password, or a bot token.

Prompts are plain callables, so ``teleton setup`` can ask with questionary, a script can pass flags, and
the tests answer from a list. Every failure a person can cause becomes a ``LoginError`` whose message says
what to do; nothing here prints.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from telethon import TelegramClient, errors
from telethon.tl import types

MAX_TRIES = 3


class LoginError(Exception):
    """A login problem, worded for the person at the keyboard."""


@dataclass
class LoginPrompts:
    """``code`` and ``password`` may be plain or async functions (questionary prompts must run async
    inside the event loop the login runs in)."""

    code: Callable[[], str | Awaitable[str]]
    password: Callable[[], str | Awaitable[str]]
    notice: Callable[[str], None] = lambda _message: None


async def _answer(prompt: Callable[[], str | Awaitable[str]]) -> str:
    value = prompt()
    return str(await value) if inspect.isawaitable(value) else str(value)


_SETUP_ERRORS: dict[type[Exception], str] = {
    errors.ApiIdInvalidError: "api_id / api_hash are not valid: copy both from https://my.telegram.org/apps",
    errors.ApiIdPublishedFloodError: "this api_id was published and is blocked: create your own at my.telegram.org",
    errors.PhoneNumberInvalidError: "the phone number is not valid: use the international format, e.g. +15551234567",
    errors.PhoneNumberBannedError: "this phone number is banned by Telegram",
    errors.PhoneNumberUnoccupiedError: "no Telegram account uses this phone number: sign up in a Telegram app first",
    errors.AccessTokenInvalidError: "the bot token is not valid: copy it again from @BotFather",
    errors.AccessTokenExpiredError: "the bot token was revoked: create a new one with @BotFather",
}


async def login_user(
    client: TelegramClient, phone: str, prompts: LoginPrompts, *, phone_code_hash: str | None = None
) -> types.User:
    """Log a user account in on a connected client; return the account."""
    me = await _already(client)
    if me is not None:
        return me
    if phone_code_hash is None:
        sent = await _guard(lambda: client.send_code_request(phone))
        phone_code_hash = getattr(sent, "phone_code_hash", None)
        prompts.notice("Telegram sent a login code to your Telegram app (or by SMS).")
    for attempt in range(1, MAX_TRIES + 1):
        code = (await _answer(prompts.code)).strip().replace(" ", "").replace("-", "")
        try:
            user = await _guard(partial(client.sign_in, phone=phone, code=code, phone_code_hash=phone_code_hash))
            return _user(user)
        except errors.SessionPasswordNeededError:
            return await _password(client, prompts)
        except (errors.PhoneCodeInvalidError, errors.PhoneCodeEmptyError):
            if attempt == MAX_TRIES:
                raise LoginError(f"the login code was wrong {MAX_TRIES} times; run `teleton setup` again") from None
            prompts.notice(f"That code is not right; try again ({MAX_TRIES - attempt} left).")
        except errors.PhoneCodeExpiredError:
            if attempt == MAX_TRIES:
                raise LoginError("the login code expired; run `teleton setup` again") from None
            sent = await _guard(lambda: client.send_code_request(phone, force_sms=False))
            phone_code_hash = getattr(sent, "phone_code_hash", None)
            prompts.notice("That code expired; Telegram sent a new one.")
    raise AssertionError("unreachable")


async def _password(client: TelegramClient, prompts: LoginPrompts) -> types.User:
    prompts.notice("This account has two-step verification: enter its password.")
    for attempt in range(1, MAX_TRIES + 1):
        password = await _answer(prompts.password)
        try:
            return _user(await _guard(partial(client.sign_in, password=password)))
        except errors.PasswordHashInvalidError:
            if attempt == MAX_TRIES:
                raise LoginError(f"the 2FA password was wrong {MAX_TRIES} times") from None
            prompts.notice(f"Wrong password; try again ({MAX_TRIES - attempt} left).")
    raise AssertionError("unreachable")


async def login_bot(client: TelegramClient, token: str) -> types.User:
    me = await _already(client)
    if me is not None:
        return me
    return _user(await _guard(lambda: client.sign_in(bot_token=token)))


async def _already(client: TelegramClient) -> types.User | None:
    if await client.is_user_authorized():
        me = await client.get_me()
        return me if isinstance(me, types.User) else None
    return None


async def _guard(call: Callable[[], object]) -> object:
    try:
        return await call()  # type: ignore[misc]
    except tuple(_SETUP_ERRORS) as exc:
        raise LoginError(_SETUP_ERRORS[type(exc)]) from exc
    except errors.FloodError as exc:
        raise LoginError(f"Telegram asks to wait {getattr(exc, 'seconds', '?')} s before trying again") from exc
    except ConnectionError as exc:
        raise LoginError(f"cannot reach Telegram: {exc}") from exc


def _user(value: object) -> types.User:
    if not isinstance(value, types.User):
        raise LoginError("Telegram did not confirm the login; run `teleton setup` again")
    return value
