"""`teleton doctor --online`: the checks that need the network, each bounded in time and never retried."""

from __future__ import annotations

import asyncio

from telethon import TelegramClient

from teleton.cli.checks import Check, provider_label
from teleton.cli.mcp_view import HELD, compare, list_remote
from teleton.config import Config
from teleton.config.presets import endpoint_for, problem
from teleton.llm import LLMClient, LLMError, LLMSettings
from teleton.llm.connect import provider_for
from teleton.providers.extras import missing
from teleton.text.counts import counted
from teleton.tools.mcp import pins
from teleton.tools.mcp.connection import McpError

ONLINE_TIMEOUT_S = 20.0


def check_model_online(config: Config) -> Check:
    """One tiny request (one token) to the main model on its own provider, never failed over: is the key
    accepted, is the server reachable, does the model exist."""
    agent = config.agent
    name = f"{provider_label(agent.provider)} API (online)"
    ep = endpoint_for(agent)
    why_not = problem(ep, agent.model)
    if why_not:
        return Check(name, None, f"not checked: {why_not}")

    async def ping() -> None:
        settings = LLMSettings.from_config(agent, max_retries=0, request_timeout_s=ONLINE_TIMEOUT_S)
        provider = provider_for(ep)
        llm = LLMClient(settings, api_key=ep.api_key, base_url=ep.base_url, provider=provider, name=agent.provider)
        try:
            await llm.create(system="Reply with OK.", messages=[{"role": "user", "content": "OK?"}], max_tokens=1)
        finally:
            await llm.close()

    try:
        asyncio.run(ping())
    except LLMError as exc:
        if exc.key_rejected:
            key = f"{ep.preset.key_env} or agent.api_key" if ep.preset.key_env else "agent.api_key"
            return Check(name, False, "API key rejected", f"set a valid key: {key}")
        if exc.unreachable:
            return Check(name, False, f"cannot reach {ep.base_url or 'the API'}: {exc}", "check the network / base_url")
        return Check(name, False, str(exc), "check agent.model (`teleton models` lists the providers)")
    except Exception as exc:  # unreachable, timed out
        return Check(name, False, f"cannot reach the API: {exc}", "check the network / base_url")
    return Check(name, True, f"{agent.model} answered")


def check_embeddings_online(config: Config) -> Check | None:
    """One embedding from a remote endpoint (``openai_compatible``; building the provider embeds a probe)."""
    if config.embedding.provider != "openai_compatible":
        return None
    # Deferred: only for an openai_compatible embedder.
    from teleton.memory.embeddings.openai_compatible import EmbeddingEndpointError, from_config

    try:
        provider = from_config(config.embedding, batch_size=1, attempts=1)
    except EmbeddingEndpointError as exc:
        return Check("Embeddings (online)", False, str(exc), "fix the embedding section (or the server)")
    asyncio.run(provider.aclose())
    return Check("Embeddings (online)", True, f"{provider.model_id}: {provider.dims}-dim vectors")


def check_telegram_online(config: Config) -> Check:
    """Connect with the stored session and ask who it is (``get_me``)."""
    tg = config.telegram
    if tg.api_id is None or not tg.api_hash:
        return Check("Telegram (online)", None, "not checked: telegram.api_id / api_hash not set")

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


def check_mcp_online(config: Config) -> list[Check]:
    """Each enabled MCP server: connect, list its tools (nothing called, no pin changed), say how many wait for
    the owner's approval."""
    servers = {name: cfg for name, cfg in config.mcp.servers.items() if cfg.enabled}
    if not servers or missing("mcp") is not None:  # the offline MCP extra check says what to install
        return []
    pinned = pins.stored(config.storage.database_file)
    found = []
    for name, cfg in servers.items():
        bounded = cfg.model_copy(update={"connect_timeout_s": min(cfg.connect_timeout_s, ONLINE_TIMEOUT_S)})
        try:
            remote = asyncio.run(list_remote(name, bounded))
        except McpError as exc:
            fix = f"`teleton mcp test {name}` tries again; check mcp.servers.{name}"
            found.append(Check(f"MCP {name} (online)", False, str(exc), fix))
            continue
        held = [s for s in compare(name, cfg, remote, pinned.get(name, {})) if s.status in HELD]
        detail = counted(len(remote), "tool")
        if held:
            detail += f", {len(held)} new or changed, held until approved (teleton mcp approve {name})"
        found.append(Check(f"MCP {name} (online)", True, detail))
    return found
