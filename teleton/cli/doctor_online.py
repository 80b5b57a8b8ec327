"""`teleton doctor --online`: the checks that need the network, each bounded in time and never retried."""

from __future__ import annotations

import asyncio

from teleton.cli.doctor import Check
from teleton.config import Config

ONLINE_TIMEOUT_S = 20.0


def check_anthropic_online(config: Config) -> Check:
    """One tiny request on the utility model (a few tokens): is the key accepted, is the API reachable."""
    from teleton.llm import LLMClient, LLMError, LLMSettings

    if not config.agent.api_key:
        return Check("Anthropic API (online)", None, "not checked: no API key")

    async def ping() -> None:
        settings = LLMSettings.from_config(config.agent, max_retries=0, request_timeout_s=ONLINE_TIMEOUT_S)
        llm = LLMClient(settings, api_key=config.agent.api_key, base_url=config.agent.base_url)
        try:
            await llm.complete("Reply with OK.", max_tokens=1)
        finally:
            await llm.close()

    try:
        asyncio.run(ping())
    except LLMError as exc:
        rejected = "401" in str(exc) or "403" in str(exc)
        fix = "set a valid key: ANTHROPIC_API_KEY or agent.api_key" if rejected else "check the model names"
        return Check("Anthropic API (online)", False, "API key rejected" if rejected else str(exc), fix)
    except Exception as exc:  # unreachable, timed out
        return Check("Anthropic API (online)", False, f"cannot reach the API: {exc}", "check the network / base_url")
    return Check("Anthropic API (online)", True, f"key accepted ({config.agent.utility_model} answered)")


def check_telegram_online(config: Config) -> Check:
    """Connect with the stored session and ask who it is (``get_me``)."""
    tg = config.telegram
    if tg.api_id is None or not tg.api_hash:
        return Check("Telegram (online)", None, "not checked: telegram.api_id / api_hash not set")
    from telethon import TelegramClient

    async def who() -> str | None:
        client = TelegramClient(str(tg.session_path), tg.api_id, tg.api_hash)
        try:
            await asyncio.wait_for(client.connect(), ONLINE_TIMEOUT_S)
            me = await asyncio.wait_for(client.get_me(), ONLINE_TIMEOUT_S)
        finally:
            await client.disconnect()
        if me is None:
            return None
        return f"@{me.username}" if me.username else str(me.id)

    try:
        me = asyncio.run(who())
    except Exception as exc:
        detail = f"could not reach Telegram ({type(exc).__name__})"
        return Check("Telegram (online)", False, detail, "check the network")
    if me is None:
        return Check("Telegram (online)", False, "the session is not logged in", "run `teleton setup` to log in")
    return Check("Telegram (online)", True, f"logged in as {me}")
