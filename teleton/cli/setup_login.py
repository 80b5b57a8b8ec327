"""`teleton setup`'s Telegram login: interactive prompts, or the flags of a scripted install (whose first run
sends the code and stops, as a script cannot know it in advance)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.console import Console

from teleton.config.schema import Config
from teleton.telegram.login import LoginError, LoginPrompts, login_bot, login_user

console = Console(soft_wrap=True)


def interactive_prompts() -> LoginPrompts:
    import questionary  # deferred: the prompt library, for an interactive setup only

    async def code() -> str:
        answer = await questionary.text("Login code", validate=lambda v: bool(v.strip()) or "the code").ask_async()
        return answer or ""

    async def password() -> str:
        return await questionary.password("2FA password").ask_async() or ""

    return LoginPrompts(code=code, password=password, notice=lambda m: console.print(f"[cyan]{m}[/]"))


@dataclass
class ScriptedLogin:
    """--non-interactive: the code and password come from flags; a missing code ends the first run."""

    code_value: str | None
    password_value: str | None
    _used: bool = False

    def prompts(self) -> LoginPrompts:
        return LoginPrompts(code=self._code, password=self._password, notice=lambda m: console.print(m))

    def _code(self) -> str:
        if self._used:  # a wrong code is not retried in a script
            raise LoginError("the login code was not accepted; run setup again without --code for a new one")
        if not self.code_value:
            raise _CodeNeeded()
        self._used = True
        return self.code_value

    def _password(self) -> str:
        if not self.password_value:
            raise LoginError("this account has a 2FA password: pass --password (or TELETON_2FA_PASSWORD)")
        value, self.password_value = self.password_value, None
        return value


class _CodeNeeded(Exception):
    pass


def _given(value: str | None, key: str) -> str:
    if not value:
        raise LoginError(f"telegram.{key} is not set: run `teleton setup` again")
    return value


async def log_in(
    config: Config, prompts: LoginPrompts, *, phone_code_hash: str | None = None, client: Any = None
) -> tuple[Any, str | None]:
    """Connect and log in; return (our User, the phone code hash if a code was sent and is still needed)."""
    # Deferred: Telethon's client, for the login only.
    from teleton.telegram.gateway import make_client, secure_session, session_file

    tg = config.telegram
    client = client or make_client(tg)
    try:
        try:
            await client.connect()
        except OSError as exc:
            raise LoginError(f"cannot reach Telegram: {exc}") from exc
        if tg.mode == "bot":
            return await login_bot(client, _given(tg.bot_token, "bot_token")), None
        try:
            return await login_user(client, _given(tg.phone, "phone"), prompts, phone_code_hash=phone_code_hash), None
        except _CodeNeeded:
            hashes = dict(client._phone_code_hash)  # Telethon keeps the hash of the code it just requested
            return None, next(iter(hashes.values()), None)
    finally:
        await client.disconnect()
        if tg.session_path is not None:
            secure_session(session_file(tg.session_path))
