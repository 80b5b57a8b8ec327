"""`teleton doctor`: check everything the daemon needs, each line OK or FAIL with the fix.

Every check is listed even when an earlier one fails (those that need the config say SKIP when it does not
load). ``--online`` adds the checks that need the network: the main model's provider with one tiny request,
a remote embedding endpoint with one embedding, and the Telegram session by connecting and asking who it is."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from teleton.cli.checks import Check, provider_label
from teleton.cli.doctor_files import check_data_dir, check_database, check_private_files, config_fix
from teleton.cli.doctor_online import (
    check_embeddings_online,
    check_mcp_online,
    check_model_online,
    check_telegram_online,
)
from teleton.config import Config, ConfigError, load_config
from teleton.config.presets import PresetError, endpoint_for, preset
from teleton.config.schema import McpServerConfig, session_file
from teleton.daemon.database_watch import read_marker
from teleton.media.speech import speech_client
from teleton.media.whisper_files import whisper_files
from teleton.memory.embeddings import hf_download, local_prompts, model_files
from teleton.memory.embeddings.openai_compatible import EmbeddingEndpointError, endpoint_of
from teleton.memory.embeddings.prompts import describe, resolve_prompts
from teleton.providers.extras import MissingExtra, install_command, missing, require
from teleton.providers.pinned_files import ModelFilesError
from teleton.storage.sqlite_driver import has_fts5, load_sqlite_vec, pick_driver
from teleton.tools.mcp.connection import references


def check_python() -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info >= (3, 11)
    return Check("Python", ok, version, "" if ok else "install Python 3.11 or newer")


def check_sqlite() -> list[Check]:
    driver = pick_driver()
    conn = driver.module.connect(":memory:")
    try:
        fts = has_fts5(conn)
        vec = load_sqlite_vec(conn)
    finally:
        conn.close()
    return [
        Check("SQLite", True, f"{driver.sqlite_version} via {driver.name}"),
        Check("FTS5", fts, "available" if fts else "missing", "" if fts else "pip install --upgrade sqlean.py"),
        Check(
            "sqlite-vec",
            vec is not None,
            vec or "cannot be loaded: search will be keyword-only",
            "" if vec else "pip install --upgrade sqlite-vec sqlean.py",
        ),
    ]


def check_config(path: Path | None) -> tuple[Check, Config | None]:
    try:
        config = load_config(path)
    except ConfigError as exc:
        return Check("Config", False, str(exc), config_fix(exc, path)), None
    where = str(config.source) if config.source else "no config file: defaults"
    return Check("Config", True, where), config


def check_embedding_model(config: Config) -> Check:
    if config.embedding.provider == "none":
        return Check("Embedding model", True, "provider none: keyword-only search")
    if config.embedding.provider == "anthropic":
        ok = bool(config.embedding.voyage_api_key)
        return Check(
            "Embedding model",
            ok,
            f"Voyage AI {config.embedding.voyage_model}" + ("" if ok else ": no key") + f" · {weights_text(config)}",
            "" if ok else "set VOYAGE_API_KEY",
        )
    if config.embedding.provider == "openai_compatible":
        return check_embedding_endpoint(config)
    from teleton.memory.embeddings.packaged import packaged_model  # deferred: only when checking a local model

    emb = config.embedding
    packaged = model_files.packaged_id(emb.model)  # None: a Hugging Face id
    try:
        if emb.model_path is not None:
            files, origin = model_files.directory_model(emb.model_path, emb.model), "model_path"
        elif packaged is None and emb.model is not None:  # unset is the default, packaged
            cached = hf_download.model_dir(hf_download.default_cache_dir(), emb.model)
            files, origin = model_files.directory_model(cached, emb.model), "Hugging Face"
        else:  # e5 (the default) is built here if this is its first use
            files, origin = packaged_model(emb.model), "packaged" if emb.model else "packaged default"
        files.verify()
        files.require_tokenizer()
    except MissingExtra as exc:  # a packaged model whose extra is not installed
        return Check("Embedding model", False, str(exc), install_command(exc.extra))
    except ModelFilesError as exc:
        fix = "point embedding.model_path at a complete model folder"
        if emb.model_path is None and packaged is not None:
            fix = f"pip install --force-reinstall {model_files.PACKAGES[packaged]}"
        elif emb.model_path is None:
            fix = "run `teleton memory index` once with network access to download it"
        return Check("Embedding model", False, str(exc), fix)
    detail = f"{files.model_id} ({origin}: {files.onnx}) · prompts: {describe(local_prompts(emb, files))}"
    return Check("Embedding model", True, f"{detail} · {weights_text(config)}")


def weights_text(config: Config) -> str:
    """``weights 0.8/0.2 (measured for …; 0.9/0.1 for a stemmed-language question)``: the hybrid search's shares."""
    vector, keyword = model_files.search_weights(config.embedding, config.memory)
    text = f"weights {vector:g}/{keyword:g} ({model_files.weights_source(config.embedding, config.memory)}"
    stemmed = model_files.stemmed_vector_weight(config.embedding, config.memory)
    if stemmed is not None:
        text += f"; {stemmed:g}/{1 - stemmed:g} for a question in a stemmed language"
    return text + ")"


def check_reranker(config: Config) -> Check | None:
    """Offline, when ``memory.reranker`` is a cross-encoder: the hf extra that reads its tokenizer, its files
    present (a Hugging Face id: downloaded by `teleton setup`) and matching their pinned or recorded sums."""
    reranker = config.memory.reranker
    if reranker.kind != "cross_encoder":
        return None
    # Deferred: the reranker's module (and numpy with it), only when one is configured
    from teleton.memory.rerank.cross_encoder import RerankerFilesError, require_tokenizers, reranker_files

    try:
        require_tokenizers(reranker.model)
        files = reranker_files(reranker, download=False)
        files.verify()
    except MissingExtra as exc:
        return Check("Reranker", False, str(exc), install_command(exc.extra))
    except RerankerFilesError as exc:
        return Check("Reranker", False, exc.reason, exc.fix)
    except (ModelFilesError, OSError) as exc:  # a cache folder this user cannot read, say
        return Check("Reranker", False, str(exc), "check memory.reranker, then run `teleton setup`")
    return Check("Reranker", True, f"{files.model_id} ({files.onnx})")


def check_workspace(config: Config) -> Check:
    workspace = config.storage.workspace
    assert workspace is not None
    ok = (workspace / "SOUL.md").is_file()
    return Check("Workspace", ok, str(workspace), "" if ok else "run `teleton init`")


def check_telegram_session(config: Config) -> Check:
    """Offline: the file is a Telethon session with an auth key, and a login finished in it (Telethon keeps
    its own user id under entity 0 once logged in; a session whose login never completed has none)."""
    session = config.telegram.session_path
    assert session is not None
    if config.telegram.api_id is None and not config.telegram.bot_token:
        detail = "no Telegram configured: terminal only (`teleton chat`); `teleton setup` connects it"
        return Check("Telegram session", None, detail)
    path = session_file(session)
    if not path.exists():
        return Check("Telegram session", False, f"{path} not found", "run `teleton setup` to log in")
    # Its mode is the Private files check's, with every other private file.
    relogin = "run `teleton setup` to log in again"
    try:
        conn = pick_driver().module.connect(f"file:{path}?mode=ro", uri=True)
        try:
            key = conn.execute("select auth_key from sessions where auth_key is not null").fetchone()
            me = conn.execute("select hash from entities where id = 0").fetchone()
        finally:
            conn.close()
    except Exception:  # not SQLite, or not Telethon's tables
        return Check("Telegram session", False, f"{path} is not a Telegram session file", relogin)
    if not key:
        return Check("Telegram session", False, f"{path} has no authorisation key", relogin)
    if not me:
        return Check("Telegram session", False, f"{path}: the login was never completed", relogin)
    return Check("Telegram session", True, f"{path} (logged in as user id {me[0]})")


def check_embedding_endpoint(config: Config) -> Check:
    """Offline: the URL, model and key the config names (``--online`` then calls the server)."""
    emb = config.embedding
    try:
        base_url, _, _ = endpoint_of(emb)
    except EmbeddingEndpointError as exc:
        return Check("Embedding model", False, str(exc), "fix the named key in the embedding section")
    if not emb.model:
        return Check("Embedding model", False, "embedding.model: missing", "set it, e.g. nomic-embed-text")
    prompts = describe(resolve_prompts(emb, [emb.model]))
    return Check("Embedding model", True, f"{emb.model} at {base_url} · prompts: {prompts} · {weights_text(config)}")


def check_transcription(config: Config) -> Check:
    """Offline: the speech-to-text the config names can work (files present, endpoint and key named)."""
    t = config.media.transcription
    if t.provider in ("off", "telegram") or not config.media.enabled:
        detail = "Telegram's TranscribeAudio (Premium accounts)" if t.provider == "telegram" else "off"
        return Check("Transcription", True, detail if config.media.enabled else "media off")
    try:
        if t.provider == "local":
            files = whisper_files(t.model, t.model_path)
            require("voice", "local transcription", "faster_whisper", "av")
            files.check_present()
            return Check("Transcription", True, f"local {files.model_id}")
        # Deferred: only when transcription is over HTTP.
        from teleton.media.transcribe_http import TranscriberConfigError, from_settings

        try:
            client = from_settings(preset_name=t.preset, base_url=t.base_url, model=t.model, api_key=t.api_key)
        except TranscriberConfigError as exc:
            return Check("Transcription", False, str(exc), "fix the named key in media.transcription")
        asyncio.run(client.aclose())
        return Check("Transcription", True, f"{client.provider} at {client.base_url}")
    except MissingExtra:  # the default install has no local transcription: not a failure, said with the fix
        return Check("Transcription", None, f"voice notes are not transcribed: {install_command('voice')}")
    except Exception as exc:  # ModelFilesError: a file missing or changed
        return Check("Transcription", False, str(exc), "reinstall Teleton, or set media.transcription.model_path")


def check_voice_replies(config: Config) -> Check | None:
    """Offline, when voice replies are on: the voice the config names can speak (package or endpoint and key)."""
    if config.media.voice_replies == "off" or not config.media.enabled:
        return None

    try:
        speech = speech_client(config.media.speech)
    except MissingExtra as exc:
        return Check("Voice replies", False, str(exc), f"{install_command('voice')}, or set media.speech")
    except ValueError as exc:
        return Check("Voice replies", False, str(exc), "fix the named key in media.speech")
    asyncio.run(speech.aclose())
    where = "eSpeak NG, local" if speech.name == "local" else f"{speech.model} at {speech.base_url}"
    return Check("Voice replies", True, f"{config.media.voice_replies}: {where}")


def check_api_key(config: Config) -> Check:
    """The main model's key, from the config or its preset's variable; a local server needs none."""
    name = f"{provider_label(config.agent.provider)} API key"
    try:
        ep = endpoint_for(config.agent)
    except PresetError as exc:
        return Check(name, False, str(exc), "run `teleton models` for the known providers")
    if ep.preset.key_env is None:
        return Check(name, True, "present" if ep.api_key else f"not needed ({ep.preset.name} runs without one)")
    ok = bool(ep.api_key)
    fix = f"export {ep.preset.key_env}=... or set agent.api_key in the config"
    return Check(name, ok, "present" if ok else "missing", "" if ok else fix)


def check_fallback_keys(config: Config) -> list[Check]:
    """Each failover provider's key, checked now rather than on the day the main provider is down."""
    found = []
    for fallback in config.agent.fallbacks:
        name = f"Fallback {fallback.provider} ({fallback.model}) key"
        try:
            key_env = preset(fallback.provider).key_env
        except PresetError as exc:
            found.append(Check(name, False, str(exc), "run `teleton models` for the known providers"))
            continue
        if key_env is None or fallback.api_key:
            found.append(Check(name, True, "present" if fallback.api_key else "not needed"))
            continue
        ok = bool(os.environ.get(key_env))
        found.append(Check(name, ok, "present" if ok else "missing", "" if ok else f"export {key_env}=..."))
    return found


def check_mcp(config: Config) -> list[Check]:
    """Offline, for each MCP server: the mcp extra, its program on PATH (or an http(s) URL), and every
    ``${NAME}`` its env and headers read set in this environment (the daemon's must hold it too)."""
    if not config.mcp.servers:
        return []
    absent = missing("mcp")
    found = [
        Check("MCP extra", True, "installed")
        if absent is None
        else Check("MCP extra", False, f"mcp.servers needs it ({absent} is not installed)", install_command("mcp"))
    ]
    for name, cfg in config.mcp.servers.items():
        found += check_mcp_server(name, cfg) if cfg.enabled else [Check(f"MCP {name}", None, "disabled")]
    return found


def check_mcp_server(name: str, cfg: McpServerConfig) -> list[Check]:
    key = f"mcp.servers.{name}"
    if cfg.command is None:
        ok = str(cfg.url).startswith(("http://", "https://"))
        found = [Check(f"MCP {name}", ok, f"{cfg.url} ({cfg.transport})", "" if ok else f"set {key}.url to http(s)")]
    else:
        program = shutil.which(cfg.command)
        detail = f"stdio: {program}" if program else f"{cfg.command!r} not found on PATH"
        fix = "" if program else f"install it, or set {key}.command to its full path"
        found = [Check(f"MCP {name}", program is not None, detail, fix)]
    for section, values in (("env", cfg.env), ("headers", cfg.headers)):
        for field, value in values.items():
            for var in references(value):
                if var not in os.environ:
                    detail = f"{key}.{section}.{field} reads ${{{var}}}, which is not set"
                    fix = f"export {var}=... where the daemon runs (systemd: Environment= or EnvironmentFile=)"
                    found.append(Check(f"MCP {name} ${{{var}}}", False, detail, fix))
    return found


def check_lost_database(config: Config) -> Check | None:
    """The last run stopped because its database file was deleted or replaced (the marker it left)."""
    lost = read_marker(config.storage.data_dir)
    if lost is None:
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(lost.at))
    detail = f"the last run stopped at {when}: {lost.path} was {lost.how} while {lost.by} ran"
    fix = "restore the last backup with `teleton restore ARCHIVE`, or start fresh; the next start tells the owner"
    return Check("Last stop", False, detail, fix)


LOCAL_CHECKS = ("Embedding model", "Workspace", "Database", "Private files",
                "Data directory", "Free disk", "Telegram session", "Model API key", "Transcription")  # fmt: skip


def run_checks(config_path: Path | None, *, online: bool = False) -> list[Check]:
    checks = [check_python(), *check_sqlite()]
    config_check, config = check_config(config_path)
    checks.append(config_check)
    if config is None:
        return checks + [Check(name, None, "not checked: the config did not load") for name in LOCAL_CHECKS]
    extra: list[Callable[[Config], Check | list[Check] | None]] = [
        check_embedding_model,
        check_reranker,
        check_workspace,
        check_database,
        check_lost_database,
        check_private_files,
        check_data_dir,
        check_telegram_session,
        check_api_key,
        check_fallback_keys,
        check_transcription,
        check_voice_replies,
        check_mcp,
    ]
    if online:
        extra += [check_model_online, check_embeddings_online, check_telegram_online, check_mcp_online]
    for fn in extra:
        result = fn(config)
        checks.extend(result if isinstance(result, list) else [result] if result is not None else [])
    return checks


def no_color() -> bool:
    return "NO_COLOR" in os.environ or not sys.stdout.isatty()
