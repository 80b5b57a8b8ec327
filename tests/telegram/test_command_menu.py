"""A bot's "/" menu (issue 36): registered at start from the one table of commands, per scope — everyone, group
admins, the owner's own chat (every command), another admin's chat — as Telegram receives the requests; a
user the session has not seen yet is skipped, not an error."""

from __future__ import annotations

from typing import Any

from telethon import errors, functions, types

from teleton.agent.commands.slash import COMMANDS
from teleton.privacy import Principals
from teleton.telegram.command_menu import register_commands
from tests.telegram.conftest import RecordingClient

OWNER = types.User(id=1001, access_hash=777, first_name="Olga")
ADMIN = types.User(id=42, access_hash=4242, first_name="Dave")


def _names(request: Any) -> list[str]:
    return [command.command for command in request.commands]


async def test_each_scope_gets_the_commands_it_may_run() -> None:
    client = RecordingClient()
    client.session.process_entities(types.contacts.ResolvedPeer(types.PeerUser(1001), [], [OWNER, ADMIN]))
    done = await register_commands(client, Principals(owner_id=1001, admin_ids=frozenset({42, 1001})))
    sent = [r for r in client.requests if isinstance(r, functions.bots.SetBotCommandsRequest)]
    assert done == len(sent) == 4
    everyone, group_admins, dave, olga = sent
    assert isinstance(everyone.scope, types.BotCommandScopeDefault)
    assert _names(everyone) == ["new", "compact", "status", "stop", "help", "forget", "skills"]
    assert isinstance(group_admins.scope, types.BotCommandScopeChatAdmins)
    assert {"pause", "resume", "policy", "tools", "tool"} <= set(_names(group_admins))
    assert not {"approve", "deny", "held", "mcp"} & set(_names(group_admins))
    assert dave.scope.peer == types.InputPeerUser(42, 4242) and "approve" not in _names(dave)
    assert olga.scope.peer == types.InputPeerUser(1001, 777) and _names(olga) == list(COMMANDS)  # every one
    assert all(0 < len(c.description) <= 256 for r in sent for c in r.commands)


async def test_a_user_not_seen_yet_waits_for_a_later_start_and_a_refusal_is_skipped() -> None:
    client = RecordingClient()

    def refuse(request: Any) -> BaseException | None:
        if isinstance(request, functions.users.GetUsersRequest):  # an id the bot has never seen: no such user
            return errors.UserIdInvalidError(request=request)
        if isinstance(getattr(request, "scope", None), types.BotCommandScopeChatAdmins):
            return errors.BotCommandInvalidError(request=request)
        return None

    client.fail_when = refuse
    done = await register_commands(client, Principals(owner_id=555, admin_ids=frozenset({555})))
    scopes = [type(r.scope) for r in client.requests if isinstance(r, functions.bots.SetBotCommandsRequest)]
    assert scopes == [types.BotCommandScopeDefault, types.BotCommandScopeChatAdmins] and done == 1
