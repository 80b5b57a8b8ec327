"""`teleton setup`: write the config, create the workspace, log in to Telegram.

Interactive by default (questionary prompts, each validated as it is typed). ``--non-interactive`` takes
everything from flags for scripted installs; a user account then needs the login code too, which a script
cannot know in advance, so the first run sends the code and prints the exact command to finish with.
"""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import questionary
import typer
import yaml
from rich.console import Console
from rich.markup import escape

from teleton.cli.context import state
from teleton.cli.setup_dashboard import ask_dashboard, dashboard_advice, web_settings
from teleton.cli.setup_login import ScriptedLogin, interactive_prompts, log_in
from teleton.cli.setup_provider import ModelChoice, agent_settings, ask_model, provider_problem
from teleton.cli.setup_reranker import prepare_reranker
from teleton.cli.setup_voice import ask_voice, transcription_settings, voice_advice
from teleton.config import ConfigError, default_config_path, load_config, write_config
from teleton.config.schema import Config
from teleton.memory.embeddings import local_model_files
from teleton.storage.private_files import private_data_dir
from teleton.storage.workspace_template import create_workspace
from teleton.telegram.login import LoginError
from teleton.text.counts import counted
from teleton.text.lines import reason

console = Console(soft_wrap=True)

POLICIES = ["open", "allowlist", "admin-only", "disabled"]
_BOT_TOKEN = re.compile(r"^\d{5,}:[A-Za-z0-9_-]{30,}$")
_API_HASH = re.compile(r"^[0-9a-fA-F]{32}$")
_PHONE = re.compile(r"^\+?[0-9 ()-]{7,20}$")
TERMINAL = "terminal"  # the wizard's "no Telegram yet": a config and a workspace for `teleton chat`


@dataclass
class SetupAnswers:
    mode: str = "user"
    api_id: int | None = None
    api_hash: str | None = None
    phone: str | None = None
    bot_token: str | None = None
    owner_id: int | None = None
    dm_policy: str = "allowlist"
    group_policy: str = "allowlist"
    api_key: str | None = None
    provider: str | None = None  # None: keep the configured provider and model
    model: str | None = None
    base_url: str | None = None
    transcribe_voice: bool | None = None  # None: not asked; media.transcription stays as it is
    dashboard: bool | None = None  # None: not asked; web stays as it is
    extra: dict[str, Any] = field(default_factory=dict)


def validate(a: SetupAnswers) -> list[str]:
    """Every problem with the answers, each in words a person can act on."""
    problems = []
    if a.mode not in ("user", "bot", TERMINAL):
        problems.append(f"--mode must be 'user', 'bot' or '{TERMINAL}'")
    problems += provider_problem(a.provider, a.model, a.base_url)
    if a.mode == TERMINAL:
        return problems
    if a.api_id is None or a.api_id <= 0:
        problems.append("--api-id is required: the number from https://my.telegram.org/apps")
    if not a.api_hash or not _API_HASH.match(a.api_hash):
        problems.append("--api-hash must be the 32-character hex string from https://my.telegram.org/apps")
    if a.mode == "user" and (not a.phone or not _PHONE.match(a.phone)):
        problems.append("--phone is required in user mode, international format (+15551234567)")
    if a.mode == "bot" and (not a.bot_token or not _BOT_TOKEN.match(a.bot_token)):
        problems.append("--bot-token must look like 123456:ABC-DEF… (from @BotFather)")
    for name, value in (("dm-policy", a.dm_policy), ("group-policy", a.group_policy)):
        if value not in POLICIES:
            problems.append(f"--{name} must be one of {', '.join(POLICIES)}")
    return problems


def config_data(existing: dict[str, Any], a: SetupAnswers) -> dict[str, Any]:
    """The config to write: the existing file with the answered keys replaced."""
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in existing.items()}
    if a.provider:
        choice = ModelChoice(a.provider, a.model, a.api_key, a.base_url)
        data["agent"] = agent_settings(data.get("agent") or {}, choice)
    elif a.api_key:
        data.setdefault("agent", {})["api_key"] = a.api_key
    if a.transcribe_voice is not None:
        data["media"] = transcription_settings(data.get("media") or {}, a.transcribe_voice)
    if a.dashboard is not None:
        data["web"] = web_settings(data.get("web") or {}, a.dashboard)
    if a.mode == TERMINAL:  # Telegram comes later: nothing of it is asked or written now
        return data
    tg = data.setdefault("telegram", {})
    tg.update(
        {
            "mode": a.mode,
            "api_id": a.api_id,
            "api_hash": a.api_hash,
            "dm_policy": a.dm_policy,
            "group_policy": a.group_policy,
        }
    )
    if a.mode == "user":
        tg["phone"] = a.phone
    else:
        tg["bot_token"] = a.bot_token
    if a.owner_id is not None:
        tg["owner_id"] = a.owner_id
    return data


def policy_warnings(tg: Any) -> list[str]:
    """Policies that answer nobody (or fewer people than one might think), said before the first silence."""
    admins = bool(tg.admin_ids) or tg.owner_id is not None
    warnings = []
    if tg.dm_policy == "allowlist" and not tg.allow_from:
        warnings.append(
            "dm_policy is allowlist and telegram.allow_from is empty: only the owner and admins get answers in DMs"
            if admins
            else "dm_policy is allowlist, telegram.allow_from is empty and no owner_id is set: nobody gets answers "
            "in DMs"
        )
    if tg.dm_policy == "admin-only" and not admins:
        warnings.append("dm_policy is admin-only and no owner_id or admin_ids is set: nobody gets answers in DMs")
    if tg.group_policy == "allowlist" and not tg.group_allow_from:
        warnings.append(
            "group_policy is allowlist and telegram.group_allow_from is empty: no group gets answers "
            "(add group chat ids to it)"
        )
    if tg.group_policy == "admin-only" and not admins:
        warnings.append("group_policy is admin-only and no owner_id or admin_ids is set: no group gets answers")
    return warnings


def ask(
    existing_tg: dict[str, Any],
    existing_agent: dict[str, Any] | None = None,
    existing_media: dict[str, Any] | None = None,
    existing_web: dict[str, Any] | None = None,
) -> SetupAnswers:
    """The interactive questions (questionary)."""

    def need(answer: Any) -> Any:
        if answer is None:  # Ctrl-C in a prompt
            raise typer.Exit(130)
        return answer

    a = SetupAnswers()
    a.mode = need(
        questionary.select(
            "Run Teleton as",
            choices=[
                questionary.Choice("a Telegram user account (userbot, needs a phone)", "user"),
                questionary.Choice("a bot (token from @BotFather)", "bot"),
                questionary.Choice("terminal only for now (teleton chat; Telegram later)", TERMINAL),
            ],
            default=existing_tg.get("mode", "user"),
        ).ask()
    )
    if a.mode == TERMINAL:
        _ask_model(a, questionary, need, existing_agent or {})
        return a
    console.print("api_id and api_hash come from https://my.telegram.org/apps (both modes need them).")
    a.api_id = int(
        need(
            questionary.text(
                "api_id",
                default=str(existing_tg.get("api_id") or ""),
                validate=lambda v: v.strip().isdigit() or "a number",
            ).ask()
        )
    )
    a.api_hash = need(
        questionary.password(
            "api_hash", validate=lambda v: bool(_API_HASH.match(v.strip())) or "32 hex characters"
        ).ask()
    ).strip()
    if a.mode == "user":
        a.phone = need(
            questionary.text(
                "Phone number of the account (+15551234567)",
                default=existing_tg.get("phone") or "",
                validate=lambda v: bool(_PHONE.match(v.strip())) or "international format, e.g. +15551234567",
            ).ask()
        ).strip()
    else:
        a.bot_token = need(
            questionary.password(
                "Bot token", validate=lambda v: bool(_BOT_TOKEN.match(v.strip())) or "123456:ABC… from @BotFather"
            ).ask()
        ).strip()
    owner = need(
        questionary.text(
            "Your own Telegram user id (the owner; empty to skip)",
            default=str(existing_tg.get("owner_id") or ""),
            validate=lambda v: v.strip() == "" or v.strip().isdigit() or "a number",
        ).ask()
    ).strip()
    a.owner_id = int(owner) if owner else None
    a.dm_policy = need(
        questionary.select(
            "Who may talk to it in DMs (dm_policy)", choices=POLICIES, default=existing_tg.get("dm_policy", "allowlist")
        ).ask()
    )
    a.group_policy = need(
        questionary.select(
            "Where may it answer in groups (group_policy)",
            choices=POLICIES,
            default=existing_tg.get("group_policy", "allowlist"),
        ).ask()
    )
    _ask_model(a, questionary, need, existing_agent or {})
    a.transcribe_voice = ask_voice(questionary, need, existing_media or {})  # voice notes come by Telegram only
    a.dashboard = ask_dashboard(questionary, need, existing_web or {})
    return a


def _ask_model(a: SetupAnswers, questionary: Any, need: Any, existing_agent: dict[str, Any]) -> None:
    choice = ask_model(questionary, need, existing_agent)
    a.provider, a.model, a.api_key, a.base_url = choice.provider, choice.model, choice.api_key, choice.base_url


def setup(
    ctx: typer.Context,
    non_interactive: Annotated[bool, typer.Option("--non-interactive", help="Take every answer from flags.")] = False,
    mode: Annotated[str, typer.Option(help="user (a Telegram account), bot, or terminal (no Telegram yet).")] = "user",
    api_id: Annotated[int | None, typer.Option(help="api_id from my.telegram.org.")] = None,
    api_hash: Annotated[str | None, typer.Option(help="api_hash from my.telegram.org.")] = None,
    phone: Annotated[str | None, typer.Option(help="The account's phone number (user mode).")] = None,
    bot_token: Annotated[str | None, typer.Option(help="Bot token from @BotFather (bot mode).")] = None,
    owner_id: Annotated[int | None, typer.Option(help="Your Telegram user id (gets admin rights).")] = None,
    dm_policy: Annotated[str, typer.Option(help="open | allowlist | admin-only | disabled")] = "allowlist",
    group_policy: Annotated[str, typer.Option(help="open | allowlist | admin-only | disabled")] = "allowlist",
    code: Annotated[str | None, typer.Option(help="Login code (non-interactive, second run).")] = None,
    phone_code_hash: Annotated[str | None, typer.Option(help="Printed by the first non-interactive run.")] = None,
    password: Annotated[str | None, typer.Option(envvar="TELETON_2FA_PASSWORD", help="2FA password.")] = None,
    skip_login: Annotated[bool, typer.Option("--skip-login", help="Write config and workspace only.")] = False,
    provider: Annotated[
        str | None, typer.Option(help="Model provider: anthropic, openai, ollama... (`teleton models`).")
    ] = None,
    model: Annotated[str | None, typer.Option(help="The model, e.g. qwen3:8b (required unless anthropic).")] = None,
    base_url: Annotated[str | None, typer.Option(help="The provider's URL, if not its preset's.")] = None,
    dashboard: Annotated[
        bool | None, typer.Option("--dashboard/--no-dashboard", help="Serve the dashboard (web.enabled, a token).")
    ] = None,
) -> None:
    """Write the config (mode 0600), create the workspace and log in to Telegram."""
    path = (state(ctx).config_path or default_config_path()).expanduser()
    existing = _read_existing(path)
    if non_interactive:
        answers = SetupAnswers(
            mode=mode,
            api_id=api_id,
            api_hash=api_hash,
            phone=phone,
            bot_token=bot_token,
            owner_id=owner_id,
            dm_policy=dm_policy,
            group_policy=group_policy,
            provider=provider,
            model=model,
            base_url=base_url,
            dashboard=dashboard,
        )
    else:
        answers = ask(
            existing.get("telegram") or {},
            existing.get("agent") or {},
            existing.get("media") or {},
            existing.get("web"),
        )
    problems = validate(answers)
    if problems:
        for problem in problems:
            console.print(f"[red]error:[/] {problem}")
        raise typer.Exit(2)
    try:
        write_config(path, config_data(existing, answers))
        config = load_config(path)
    except ConfigError as exc:
        console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    console.print(f"[green]config written[/] {path} (mode 0600)")
    private_data_dir(config.storage.data_dir)
    assert config.storage.workspace is not None
    created = create_workspace(config.storage.workspace)
    console.print(f"[green]workspace[/] {config.storage.workspace} ({counted(len(created.created), 'file')} created)")
    prepare_embeddings(config)
    prepare_reranker(config, console)
    advice = voice_advice(answers.transcribe_voice)
    if advice:
        console.print(f"[yellow]voice notes:[/] {escape(advice)}")  # escape: "teleton[voice]" is no markup
    shown = dashboard_advice(config.web.model_dump()) if answers.dashboard else None
    if shown:
        console.print(f"[green]dashboard:[/] {escape(shown)}")
    if answers.mode == TERMINAL:
        console.print("Talk to it now with `teleton chat`; run `teleton setup` again to connect Telegram.")
        return
    for warning in policy_warnings(config.telegram):
        console.print(f"[yellow]warning:[/] {warning}")
    if skip_login:
        return
    scripted = ScriptedLogin(code, password) if non_interactive else None
    prompts = scripted.prompts() if scripted else interactive_prompts()
    try:
        me, pending_hash = asyncio.run(log_in(config, prompts, phone_code_hash=phone_code_hash))
    except LoginError as exc:
        console.print(f"[red]login failed:[/] {exc}")
        raise typer.Exit(1) from None
    if me is None:
        console.print(
            "A login code was sent to the account's Telegram app. Finish with:\n"
            f"  teleton setup --non-interactive [same flags] --code CODE --phone-code-hash {pending_hash}"
        )
        raise typer.Exit(3)
    name = " ".join(p for p in (me.first_name, me.last_name) if p) or me.username or me.id
    console.print(f"[green]logged in[/] as {name} (id {me.id}); session stored with mode 0600")


def prepare_embeddings(config: Config) -> None:
    """Build (or download) the local embedding model now, once, so the daemon's first start does not wait for
    it (multilingual-e5-small is built from its wheel at first use, ~8 s). A failure is one line: the daemon
    then searches by keyword and ``teleton doctor`` says more."""
    if config.embedding.provider != "local":
        return

    started = time.perf_counter()
    try:
        files = local_model_files(config.embedding)
        files.verify()
    except Exception as exc:
        console.print(f"[yellow]embedding model not ready:[/] {escape(reason(exc, 200))} (`teleton doctor` says more)")
        return
    console.print(f"[green]embedding model[/] {files.model_id} ready ({time.perf_counter() - started:.1f} s)")


def _read_existing(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        console.print(f"[red]error:[/] {path} is not valid YAML ({exc}); fix or move it first")
        raise typer.Exit(2) from None
    return data if isinstance(data, dict) else {}
