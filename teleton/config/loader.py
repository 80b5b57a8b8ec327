"""Read, validate and write ``config.yaml``.

A bad config is the most common way a daemon fails to start, so every problem becomes one line naming the
key path (with the closest valid key for a typo) instead of a traceback. Secrets may come from the
environment: ``ANTHROPIC_API_KEY``, ``VOYAGE_API_KEY`` and ``TELETON_<SECTION>__<KEY>`` for any key.
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from teleton.config.presets import endpoint_for, problem
from teleton.config.schema import Config

ENV_PREFIX = "TELETON_"
# Well-known variables other tools already use for the same secrets.
ENV_ALIASES = {
    "ANTHROPIC_API_KEY": ("agent", "api_key"),
    "ANTHROPIC_BASE_URL": ("agent", "base_url"),
    "VOYAGE_API_KEY": ("embedding", "voyage_api_key"),
}


class ConfigError(Exception):
    """A config problem, worded for the person who has to fix it."""


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("TELETON_CONFIG", "~/.teleton/config.yaml")).expanduser()


def load_config(path: Path | str | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Load ``path`` (or the default location), apply environment overrides, validate, resolve paths.

    An explicit path must exist; the default location may be absent, which means all defaults.
    """
    env = os.environ if env is None else env
    explicit = path is not None or "TELETON_CONFIG" in env
    cfg_path = Path(path).expanduser() if path is not None else default_config_path(env)
    data: dict[str, Any] = {}
    if cfg_path.exists():
        data = read_config_file(cfg_path)
    elif explicit:
        raise ConfigError(f"{cfg_path}: config file not found (create one with `teleton setup`)")
    sources = _apply_env(data, env)
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_problems(exc, cfg_path.name, sources)) from None
    config.source = cfg_path if cfg_path.exists() else None
    _drop_foreign_aliases(config, sources)
    return _resolve_paths(config)


def _drop_foreign_aliases(config: Config, sources: Mapping[str, str]) -> None:
    """ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL are Anthropic's: never sent to another provider."""
    if config.agent.provider == "anthropic":
        return
    for key in ("api_key", "base_url"):
        if sources.get(f"agent.{key}", "").startswith("ANTHROPIC_"):
            setattr(config.agent, key, None)


def read_config_file(path: Path) -> dict[str, Any]:
    """The config file as written (no environment overrides, no defaults); ConfigError, one line, if unreadable."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path.name}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}): "
            "save the file as UTF-8"
        ) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader that refuses duplicate keys
    except _DuplicateKey as exc:
        raise ConfigError(f"{path.name} {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path.name}{where}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path.name}: the top level must be a mapping of sections (agent:, telegram:, ...)")
    # A section left empty (`telegram:` with every key commented out) means its defaults.
    return {key: {} if value is None else value for key, value in data.items()}


class _DuplicateKey(yaml.YAMLError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's rule is that the last of two equal keys wins, silently: a second `telegram:` block would wipe
    the first one's owner_id. Here it is an error naming both lines."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(f"line {line}: duplicate key '{key}' (first at line {seen[key]})")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def _apply_env(data: dict[str, Any], env: Mapping[str, str]) -> dict[str, str]:
    """Put overrides from the environment into ``data``; returns which key each variable set."""
    sources: dict[str, str] = {}
    for name, value in env.items():
        if name in ENV_ALIASES:
            keys: tuple[str, ...] = ENV_ALIASES[name]
        elif name.startswith(ENV_PREFIX) and "__" in name:
            keys = tuple(part.lower() for part in name[len(ENV_PREFIX) :].split("__"))
        else:
            continue
        node = data
        for key in keys[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        # The schema types the text (a phone number "+1555…" stays a string; pydantic turns "12345" into an
        # int where an int is wanted); only lists need parsing: JSON ("[1, 2]") or comma-separated.
        node[keys[-1]] = _list_value(value) if _is_list(keys) else value
        sources[".".join(keys)] = name
    return sources


def _is_list(keys: tuple[str, ...]) -> bool:
    model: Any = Config
    for key in keys:
        field = getattr(model, "model_fields", {}).get(key)
        if field is None:
            return False
        model = field.annotation
    return get_origin(model) is list


def _list_value(value: str) -> Any:
    if value.strip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value  # reported by validation, naming the variable
    items = [part.strip() for part in value.split(",") if part.strip()]
    return [int(item) if item.lstrip("-").isdigit() else item for item in items]


_TYPE_WORDS = {
    "int_parsing": "expected an integer",
    "int_type": "expected an integer",
    "float_parsing": "expected a number",
    "float_type": "expected a number",
    "bool_parsing": "expected true or false",
    "bool_type": "expected true or false",
    "string_type": "expected a string",
    "list_type": "expected a list",
    "model_type": "expected a mapping",
    "dict_type": "expected a mapping",
    "path_type": "expected a path",
}


def _problems(exc: ValidationError, file_name: str, sources: Mapping[str, str] | None = None) -> str:
    """Every problem of a config, on one line."""
    problems = [_describe(err, file_name, sources or {}) for err in exc.errors()]
    return (f"{len(problems)} problems: " if len(problems) > 1 else "") + "; ".join(problems)


def _describe(err: Any, file_name: str, sources: Mapping[str, str]) -> str:
    """One problem: where it is (the file, or the environment variable that set it), the key, and why."""
    loc = [str(part) for part in err["loc"] if not str(part).startswith(("int", "str", "function"))]
    # Union members (int | str, X | None) add their type name to the location; keep only real keys.
    loc = [part for part in loc if not _is_type_tag(part)]
    key = ".".join(loc)
    variable = next((sources[k] for k in sources if key == k or key.startswith(k + ".")), None)
    where = f"environment {variable} ({key})" if variable else f"{file_name}: {key}"
    kind = err["type"]
    if kind == "extra_forbidden":
        return f"{where}: unknown key{_suggestion(loc)}"
    if kind == "missing":
        return f"{where}: required value is missing"
    if isinstance(err["input"], dict):  # a whole section is wrong (a validator): its input may hold secrets
        return f"{where}: {str(err['msg']).removeprefix('Value error, ')}"
    got = "(hidden)" if _is_secret(loc) else repr(err["input"])
    if kind == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{where}: must be one of {expected}, got {got}"
    words = _TYPE_WORDS.get(kind, err["msg"])
    return f"{where}: {words}, got {got}"


def _is_secret(loc: list[str]) -> bool:
    """Keys whose values never appear in a message (the schema marks them ``repr=False``)."""
    model: Any = Config
    for part in loc:
        if get_origin(model) is dict:  # a named entry (mcp.servers.<name>): the part is its name
            model = get_args(model)[1]
            continue
        field = getattr(model, "model_fields", {}).get(part)
        if field is None:
            return False
        if not field.repr:
            return True
        model = field.annotation
        if get_origin(model) is list:  # a list of sections (agent.fallbacks): its items' fields
            model = get_args(model)[0]
    return False


def _is_type_tag(part: str) -> bool:
    return part in {"int", "str", "float", "bool", "none", "list[int]", "list[str]"} or part.startswith(
        ("list[", "literal[", "nullable[", "lax-or-strict[")
    )


def _suggestion(loc: list[str]) -> str:
    section: type[BaseModel] = Config
    for part in loc[:-1]:
        field = section.model_fields.get(part)
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return ""
        section = annotation
    valid = [name for name in section.model_fields if name != "source"]
    close = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else f" (valid keys: {', '.join(valid)})"


def _resolve_paths(config: Config) -> Config:
    storage = config.storage
    storage.data_dir = storage.data_dir.expanduser()
    storage.database = (storage.database or storage.data_dir / "teleton.db").expanduser()
    storage.workspace = (storage.workspace or storage.data_dir / "workspace").expanduser()
    tg = config.telegram
    tg.session_path = (tg.session_path or storage.data_dir / "telegram.session").expanduser()
    if config.embedding.model_path is not None:
        config.embedding.model_path = config.embedding.model_path.expanduser()
    if config.logging.file is not None:
        config.logging.file = config.logging.file.expanduser()
    backup = config.backup
    backup.dir = (backup.dir or storage.data_dir / "backups").expanduser()
    if backup.key_file is not None:
        backup.key_file = backup.key_file.expanduser()
    return config


@dataclass(frozen=True)
class Credentials:
    api_id: int
    api_hash: str
    login: str  # the bot token (telegram.mode bot) or the phone number (user)


def require_telegram(config: Config) -> Credentials:
    """The credentials ``teleton start`` needs; every missing one named at once, with where to set it."""
    tg = config.telegram
    # Bots log in over MTProto too, so they need the app's api_id/api_hash as well as the token.
    needed = ["api_id", "api_hash", "bot_token"] if tg.mode == "bot" else ["api_id", "api_hash", "phone"]
    missing = [key for key in needed if getattr(tg, key) in (None, "")]
    if missing and all(getattr(tg, key) in (None, "") for key in ("api_id", "api_hash", "phone", "bot_token")):
        raise ConfigError(
            "this config has no Telegram account yet (set up for the terminal): `teleton chat` talks to the "
            "agent here; `teleton setup` connects Telegram"
        )
    if missing:
        names = ", ".join(f"telegram.{key}" for key in missing)
        variables = ", ".join(f"{ENV_PREFIX}TELEGRAM__{key.upper()}" for key in missing)
        raise ConfigError(
            f"{names}: required for telegram.mode '{tg.mode}' but missing (run `teleton setup`, or set "
            f"{'them' if len(missing) > 1 else 'it'} in the config or as {variables})"
        )
    return Credentials(int(tg.api_id or 0), str(tg.api_hash), str(getattr(tg, needed[2])))


def require_llm(config: Config, env: Mapping[str, str] | None = None) -> None:
    """The model provider can serve the agent: a key where one is needed, a URL, tool calling."""
    agent = config.agent
    trouble = problem(endpoint_for(agent, env), agent.model)
    if trouble:
        raise ConfigError(trouble)


def require_private_config(config: Config) -> None:
    """Refuse a config file that holds a secret and that group or others may read: one line with the fix."""
    path = config.source
    if path is None:
        return
    mode = path.stat().st_mode & 0o777
    if not mode & 0o077:
        return
    secrets = _secret_keys(read_config_file(path))
    if secrets:
        raise ConfigError(
            f"{path} holds secrets ({', '.join(secrets)}) but group or others may read it (mode {mode:o}): "
            f"run `chmod 600 {path}` (or pass --insecure-config)"
        )


def _secret_keys(data: Mapping[str, Any], loc: tuple[str, ...] = (), name: str = "") -> list[str]:
    """The keys of ``data`` (named as a person reads them) that hold a value the schema marks secret."""
    found = []
    for key, value in data.items():
        path, dotted = (*loc, str(key)), f"{name}{key}"
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            where = f"{dotted}[{index}]" if isinstance(value, list) else dotted
            if isinstance(item, Mapping):
                found += _secret_keys(item, path, f"{where}.")
            elif item not in (None, "") and "${" not in str(item) and _is_secret(list(path)):  # ${NAME}: named
                found.append(where)
    return found


def write_private_file(path: Path, text: str) -> None:
    """Write ``text`` atomically with mode 0600 (it may hold secrets)."""
    path = path.expanduser()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # its folder is the data dir: private too
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_config(path: Path, data: Mapping[str, Any]) -> None:
    """Write a config mapping as YAML, mode 0600; the result is validated first so it always loads."""
    try:
        Config.model_validate(dict(data))
    except ValidationError as exc:
        raise ConfigError(_problems(exc, path.name)) from None
    write_private_file(path, yaml.safe_dump(dict(data), sort_keys=False, allow_unicode=True))
