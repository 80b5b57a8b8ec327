"""A bot's command menu (issue 36): the commands Teleton answers, registered at start for who may use them.

Telegram shows a bot's commands in the "/" menu by scope: everyone gets the commands anyone may run, group
admins also the admin commands, and the owner's own chat every command (approvals, ``/mcp``). Another admin's
chat gets the admin commands. The list comes from the one table of commands (``agent.commands.slash``), so
the menu can never offer what the bot does not answer. A user the bot has not seen yet (no access hash in
the session) gets the menu at a later start.
"""

from __future__ import annotations

from collections.abc import Iterable

import structlog
from telethon import TelegramClient, functions, types

from teleton.agent.commands.slash import COMMANDS, CommandSpec
from teleton.privacy import Principals

log = structlog.get_logger(__name__)

DESCRIPTION_CAP = 256  # Telegram's limit on a command's description


def menu(specs: Iterable[CommandSpec], *, admin: bool, owner: bool) -> list[types.BotCommand]:
    """The commands someone with these rights may run, as Telegram's menu lists them."""
    return [
        types.BotCommand(spec.name, spec.help[:DESCRIPTION_CAP])
        for spec in specs
        if (admin or not spec.admin) and (owner or not spec.owner)
    ]


async def register_commands(client: TelegramClient, principals: Principals) -> int:
    """Set the menu for everyone, for group admins, and in the owner's and each admin's own chat; the number
    of menus set. A scope Telegram refuses is logged and skipped: the bot answers its commands anyway."""
    specs = list(COMMANDS.values())
    scopes: list[tuple[types.TypeBotCommandScope, list[types.BotCommand]]] = [
        (types.BotCommandScopeDefault(), menu(specs, admin=False, owner=False)),
        (types.BotCommandScopeChatAdmins(), menu(specs, admin=True, owner=False)),
    ]
    for user_id in sorted(principals.admin_ids | ({principals.owner_id} if principals.owner_id else set())):
        try:
            peer = await client.get_input_entity(user_id)
        except Exception as exc:  # not seen by this session yet: its menu comes at a later start
            log.info("command_menu_deferred", user_id=user_id, reason=type(exc).__name__)
            continue
        is_owner = principals.is_owner(user_id)
        scopes.append((types.BotCommandScopePeer(peer), menu(specs, admin=True, owner=is_owner)))
    done = 0
    for scope, commands in scopes:
        try:
            await client(functions.bots.SetBotCommandsRequest(scope=scope, lang_code="", commands=commands))
            done += 1
        except Exception as exc:
            log.warning("command_menu_refused", scope=type(scope).__name__, error=f"{type(exc).__name__}: {exc}")
    log.info("command_menu_set", menus=done)
    return done
