"""`teleton setup`: the login flow against Telethon's real auth code, and the config it writes."""

from __future__ import annotations

import os
import socket
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from telethon import TelegramClient, errors, functions, password
from telethon.sessions import MemorySession
from telethon.tl import types
from typer.testing import CliRunner

from teleton.cli.setup_cmd import setup
from teleton.cli.setup_login import ScriptedLogin, log_in
from teleton.config import load_config
from teleton.telegram.login import LoginError, LoginPrompts, login_bot, login_user
from tests.telegram.conftest import ME, RecordingClient

GOOD_CODE = "12345"
BOT = types.User(id=4242, bot=True, first_name="Teleton", username="teleton_bot", access_hash=5)


def _srp_password() -> types.account.Password:
    """A 2FA challenge Telethon's SRP code accepts: Telegram's published 2048-bit prime, g = 3."""
    prime = next(c for c in password.check_prime_and_good.__code__.co_consts if isinstance(c, tuple) and len(c) == 256)
    p = int.from_bytes(bytes(prime), "big")
    srp_b = pow(3, 123456789, p).to_bytes(256, "big")
    algo = types.PasswordKdfAlgoSHA256SHA256PBKDF2HMACSHA512iter100000SHA256ModPow(
        salt1=b"salt1", salt2=b"salt2", g=3, p=bytes(prime)
    )
    return types.account.Password(
        new_algo=algo,
        new_secure_algo=types.SecurePasswordKdfAlgoUnknown(),
        secure_random=b"r" * 32,
        has_password=True,
        current_algo=algo,
        srp_B=srp_b,
        srp_id=77,
    )


class TelegramAuth(RecordingClient):
    """Telegram's side of a login: a code, maybe a 2FA password, scripted wrong answers."""

    def __init__(self, *, two_fa: bool = False, wrong_passwords: int = 0, bad_api: bool = False) -> None:
        super().__init__()
        self.two_fa, self.wrong_passwords, self.bad_api = two_fa, wrong_passwords, bad_api
        self.user: types.User | None = None

    def answer(self, request: Any) -> Any:
        if isinstance(request, functions.users.GetUsersRequest):
            if self.user is None:
                raise errors.AuthKeyUnregisteredError(request=request)
            return [self.user]
        if isinstance(request, functions.auth.SendCodeRequest):
            if self.bad_api:
                raise errors.ApiIdInvalidError(request=request)
            return types.auth.SentCode(type=types.auth.SentCodeTypeApp(length=5), phone_code_hash="hash-1")
        if isinstance(request, functions.auth.SignInRequest):
            assert request.phone_code_hash == "hash-1"
            if request.phone_code != GOOD_CODE:
                raise errors.PhoneCodeInvalidError(request=request)
            if self.two_fa:
                raise errors.SessionPasswordNeededError(request=request)
            return self._authorize(ME)
        if isinstance(request, functions.account.GetPasswordRequest):
            return _srp_password()
        if isinstance(request, functions.auth.CheckPasswordRequest):
            assert isinstance(request.password, types.InputCheckPasswordSRP) and request.password.srp_id == 77
            if self.wrong_passwords:
                self.wrong_passwords -= 1
                raise errors.PasswordHashInvalidError(request=request)
            return self._authorize(ME)
        if isinstance(request, functions.auth.ImportBotAuthorizationRequest):
            if request.bot_auth_token != "123456:" + "A" * 35:
                raise errors.AccessTokenInvalidError(request=request)
            return self._authorize(BOT)
        if isinstance(request, functions.updates.GetStateRequest):
            return types.updates.State(pts=1, qts=0, date=datetime.now(UTC), seq=0, unread_count=0)
        if isinstance(request, functions.updates.GetDifferenceRequest):
            return types.updates.DifferenceEmpty(date=datetime.now(UTC), seq=0)
        return super().answer(request)

    def _authorize(self, user: types.User) -> types.auth.Authorization:
        self.user = user
        return types.auth.Authorization(user=user)


def scripted(codes: list[str], passwords: list[str] = ()) -> tuple[LoginPrompts, list[str]]:
    notices: list[str] = []
    codes, passwords = list(codes), list(passwords)
    return LoginPrompts(code=lambda: codes.pop(0), password=lambda: passwords.pop(0), notice=notices.append), notices


async def test_login_with_code() -> None:
    client = TelegramAuth()
    prompts, notices = scripted([GOOD_CODE])
    me = await login_user(client, "+15550000", prompts)
    assert me.id == ME.id
    assert any("login code" in n for n in notices)


async def test_wrong_code_is_retried_then_accepted() -> None:
    client = TelegramAuth()
    prompts, notices = scripted(["11111", "1 2 3 4 5"])  # a typo, then the code typed with spaces
    assert (await login_user(client, "+15550000", prompts)).id == ME.id
    assert any("not right" in n for n in notices)
    assert len([r for r in client.requests if isinstance(r, functions.auth.SignInRequest)]) == 2


async def test_three_wrong_codes_is_a_clear_failure() -> None:
    prompts, _ = scripted(["1", "2", "3"])
    with pytest.raises(LoginError, match="wrong 3 times"):
        await login_user(TelegramAuth(), "+15550000", prompts)


async def test_two_factor_password_with_one_wrong_try() -> None:
    client = TelegramAuth(two_fa=True, wrong_passwords=1)
    prompts, notices = scripted([GOOD_CODE], ["wrong", "right"])
    assert (await login_user(client, "+15550000", prompts)).id == ME.id
    assert any("two-step" in n for n in notices) and any("Wrong password" in n for n in notices)


async def test_bad_api_id_is_explained() -> None:
    prompts, _ = scripted([GOOD_CODE])
    with pytest.raises(LoginError, match=r"api_id / api_hash are not valid.*my.telegram.org"):
        await login_user(TelegramAuth(bad_api=True), "+15550000", prompts)


async def test_flood_wait_during_login_is_explained() -> None:
    client = TelegramAuth()
    client.failures = [errors.AuthKeyUnregisteredError(request=None), errors.FloodWaitError(request=None, capture=90)]
    with pytest.raises(LoginError, match="wait 90 s"):
        await login_user(client, "+15550000", scripted([GOOD_CODE])[0])


async def test_bot_login_and_bad_token() -> None:
    assert (await login_bot(TelegramAuth(), "123456:" + "A" * 35)).id == BOT.id
    with pytest.raises(LoginError, match="bot token is not valid"):
        await login_bot(TelegramAuth(), "123456:" + "B" * 35)


async def test_scripted_login_reports_that_a_code_is_needed() -> None:
    client = TelegramAuth()
    with pytest.raises(Exception) as info:
        await login_user(client, "+15550000", ScriptedLogin(None, None).prompts())
    assert type(info.value).__name__ == "_CodeNeeded"
    assert client._phone_code_hash  # what the first run prints for the second


async def test_unreachable_telegram_is_a_clear_login_error(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on: the connection is refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = TelegramClient(MemorySession(), 1, "0" * 32, connection_retries=0, timeout=2)
    client.session.set_dc(2, "127.0.0.1", port)
    config = load_config(_config_file(tmp_path, {}))
    with pytest.raises(LoginError, match="cannot reach Telegram"):
        await log_in(config, scripted([GOOD_CODE])[0], client=client)


def _config_file(tmp_path: Path, telegram: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    data = {
        "storage": {"data_dir": str(tmp_path / "data")},
        "telegram": {"api_id": 1, "api_hash": "0" * 32, "phone": "+15550000", **telegram},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(setup)
    app.command("noop")(lambda: None)  # two commands, so `setup` is addressed by name as in teleton
    return app


def test_non_interactive_setup_writes_private_config_and_workspace(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}, "agent": {"model": "m"}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    result = CliRunner().invoke(
        _cli(),
        [
            "setup",
            "--non-interactive",
            "--mode",
            "bot",
            "--api-id",
            "12345",
            "--api-hash",
            "ab" * 16,
            "--bot-token",
            "123456:" + "A" * 35,
            "--owner-id",
            "99",
            "--dm-policy",
            "admin-only",
            "--skip-login",
        ],
    )
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    config = load_config(path)
    tg = config.telegram
    assert (tg.mode, tg.api_id, tg.owner_id, tg.dm_policy) == ("bot", 12345, 99, "admin-only")
    assert config.agent.model == "m"  # the rest of an existing config is kept
    assert (tmp_path / "data" / "workspace" / "SOUL.md").exists()


def test_non_interactive_setup_names_every_bad_flag(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("TELETON_CONFIG", str(tmp_path / "config.yaml"))
    result = CliRunner().invoke(
        _cli(),
        [
            "setup",
            "--non-interactive",
            "--api-id",
            "0",
            "--api-hash",
            "nothex",
            "--phone",
            "call me",
            "--dm-policy",
            "sometimes",
        ],
    )
    assert result.exit_code == 2
    for flag in ("--api-id", "--api-hash", "--phone", "--dm-policy"):
        assert flag in result.output
    assert not (tmp_path / "config.yaml").exists()


def _keys(*answers: str) -> str:
    return "".join(answers)


ENTER, DOWN = "\r", "\x1b[B"


def _wizard(
    tmp_path: Path,
    monkeypatch: Any,
    keys_typed: str,
    *args: str,
    local: dict[str, str] | None = None,
    existing: dict[str, Any] | None = None,
) -> tuple[Any, Path]:
    """`teleton setup` answered through prompt_toolkit's pipe input, as a person would type it; ``local``
    is where local model servers are looked for (none by default, whatever runs on this machine);
    ``existing``: the config's sections before it runs (setup run again)."""
    from teleton.cli import setup_provider

    monkeypatch.setattr(setup_provider, "LOCAL_URLS", local or {})
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}, **(existing or {})}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with create_pipe_input() as keys:
        keys.send_text(keys_typed)
        with create_app_session(input=keys, output=DummyOutput()):
            return CliRunner().invoke(_cli(), ["setup", *args], terminal_width=200), path


def test_interactive_wizard_writes_what_was_answered(tmp_path: Path, monkeypatch: Any) -> None:
    typed = _keys(
        DOWN + ENTER,  # mode: bot
        "4242" + ENTER,  # api_id
        "cd" * 16 + ENTER,  # api_hash
        "123456:" + "Z" * 35 + ENTER,  # bot token
        "777" + ENTER,  # owner id
        DOWN + DOWN + ENTER,  # dm_policy: allowlist -> disabled
        ENTER,  # group_policy: allowlist
        ENTER,  # model provider: anthropic
        "sk-ant-test" + ENTER,  # Anthropic key
        "n",  # transcribe voice notes locally: no
        "y",  # serve the dashboard: yes
    )
    result, path = _wizard(tmp_path, monkeypatch, typed, "--skip-login")
    assert result.exit_code == 0, result.output
    config = load_config(path)
    assert config.web.enabled and config.web.token and len(config.web.token) >= 40  # a login of its own
    assert "dashboard: " in result.output and "http://127.0.0.1:8765/" in result.output
    tg = config.telegram
    assert (tg.mode, tg.api_id, tg.bot_token, tg.owner_id, tg.dm_policy, tg.group_policy) == (
        "bot",
        4242,
        "123456:" + "Z" * 35,
        777,
        "disabled",
        "allowlist",
    )
    assert config.agent.api_key == "sk-ant-test"
    assert config.media.transcription.provider == "off"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


async def test_interactive_login_prompts_retry_a_wrong_code_and_ask_for_2fa() -> None:
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from teleton.cli.setup_login import interactive_prompts

    client = TelegramAuth(two_fa=True)
    with create_pipe_input() as keys:
        keys.send_text(_keys("99999" + ENTER, GOOD_CODE + ENTER, "hunter2" + ENTER))
        with create_app_session(input=keys, output=DummyOutput()):
            me = await login_user(client, "+15550000", interactive_prompts())
    assert me.id == ME.id
    assert any(isinstance(r, functions.auth.CheckPasswordRequest) for r in client.requests)


def test_setup_warns_about_policies_that_answer_nobody(tmp_path: Path, monkeypatch: Any) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    flags = ["setup", "--non-interactive", "--mode", "bot", "--api-id", "12345", "--api-hash", "ab" * 16,
             "--bot-token", "123456:" + "A" * 35, "--skip-login"]  # fmt: skip
    result = CliRunner().invoke(_cli(), flags, terminal_width=200)
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: dm_policy is allowlist, telegram.allow_from is empty and no owner_id is set: nobody gets "
        "answers in DMs",
        "warning: group_policy is allowlist and telegram.group_allow_from is empty: no group gets answers (add "
        "group chat ids to it)",
    ]
    result = CliRunner().invoke(_cli(), [*flags, "--owner-id", "7", "--group-policy", "open"], terminal_width=200)
    warnings = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: dm_policy is allowlist and telegram.allow_from is empty: only the owner and admins get answers in DMs"
    ]


def test_the_wizard_can_set_up_the_terminal_only(tmp_path: Path, monkeypatch: Any) -> None:
    typed = _keys(DOWN + DOWN + ENTER, ENTER, "sk-ant-test" + ENTER)  # terminal only; Anthropic; its key
    result, path = _wizard(tmp_path, monkeypatch, typed)
    assert result.exit_code == 0, result.output
    assert "Talk to it now with `teleton chat`" in result.output and "logged in" not in result.output
    config = load_config(path)
    assert config.agent.api_key == "sk-ant-test" and config.telegram.api_id is None
    assert (tmp_path / "data" / "workspace" / "SOUL.md").exists()
