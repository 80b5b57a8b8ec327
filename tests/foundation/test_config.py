"""Config loading: every mistake is one line naming the key, and secrets can come from the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from teleton.config import Config, ConfigError, load_config, require_llm, require_telegram, write_config
from teleton.config.loader import read_config_file

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("telegram:\n  dm_polcy: open\n", "telegram.dm_polcy: unknown key (did you mean 'dm_policy'?)"),
        ("memroy:\n  min_score: 0.2\n", "memroy: unknown key (did you mean 'memory'?)"),
        ("agent:\n  max_tokens: lots\n", "agent.max_tokens: expected an integer, got 'lots'"),
        ("telegram:\n  require_mention: maybe\n", "telegram.require_mention: expected true or false"),
        ("telegram:\n  dm_policy: sometimes\n", "telegram.dm_policy: must be one of 'open', 'allowlist'"),
        ("agent:\n  model: a: b\n", "config.yaml line 2, column 11: invalid YAML: mapping values"),
        ("- just\n- a list\n", "the top level must be a mapping"),
    ],
)
def test_config_errors_name_the_key(tmp_path: Path, isolated_home: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_required_values_are_named_together(isolated_home: Path) -> None:
    config = load_config()
    config.telegram.api_id = 1
    with pytest.raises(ConfigError) as err:
        require_telegram(config)
    assert str(err.value).startswith("telegram.api_hash, telegram.phone: required for telegram.mode 'user'")
    assert "TELETON_TELEGRAM__API_HASH, TELETON_TELEGRAM__PHONE" in str(err.value)
    config.telegram.mode = "bot"
    config.telegram.api_hash = "abc"
    with pytest.raises(ConfigError, match=r"^telegram\.bot_token: required"):
        require_telegram(config)
    with pytest.raises(ConfigError, match=r"^agent\.api_key: required"):
        require_llm(config)


def test_a_terminal_only_config_says_so(isolated_home: Path) -> None:
    """`teleton setup --mode terminal` writes no Telegram section: start says what to run, not "api_id"."""
    with pytest.raises(ConfigError) as err:
        require_telegram(load_config())
    assert "no Telegram account yet" in str(err.value)
    assert "`teleton chat`" in str(err.value) and "`teleton setup`" in str(err.value)
    assert "api_id" not in str(err.value)


def test_explicit_missing_file_is_an_error(tmp_path: Path, isolated_home: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("telegram:\n  dm_polcy: open\n", "config error: config.yaml: telegram.dm_polcy: unknown key"),
        ("agent:\n  temperature: hot\n", "config error: config.yaml: agent.temperature: expected a number"),
        ("agent: [\n", "invalid YAML"),
    ],
)
def test_cli_reports_config_error_with_exit_code_2(
    tmp_path: Path, isolated_home: Path, text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    proc = subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(path), "init"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_environment_supplies_secrets_and_overrides(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    monkeypatch.setenv("TELETON_TELEGRAM__API_ID", "12345")
    monkeypatch.setenv("TELETON_TELEGRAM__ADMIN_IDS", "[1, 2]")
    monkeypatch.setenv("TELETON_MEMORY__MIN_SCORE", "0.3")
    config = load_config()
    assert config.agent.api_key == "sk-ant-from-env"
    assert config.telegram.api_id == 12345
    assert config.telegram.admin_ids == [1, 2]
    assert config.memory.min_score == 0.3
    # The key never shows up in the config's repr (and so never in a log line that prints it).
    assert "sk-ant-from-env" not in repr(config)


def test_env_override_with_bad_value_names_the_variable(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELETON_TELEGRAM__RATE_LIMIT_GLOBAL", "many")
    with pytest.raises(ConfigError) as err:
        load_config()
    expected = "environment TELETON_TELEGRAM__RATE_LIMIT_GLOBAL (telegram.rate_limit_global): expected an integer"
    assert str(err.value) == expected + ", got 'many'"


def test_env_overrides_are_typed_by_the_schema_not_yaml(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELETON_TELEGRAM__PHONE", "+15551234567")  # YAML would read an int
    monkeypatch.setenv("TELETON_TELEGRAM__ALLOW_FROM", "@alice, 42")
    monkeypatch.setenv("TELETON_AGENT__MODEL", "true")  # YAML would read a bool
    config = load_config()
    assert config.telegram.phone == "+15551234567"
    assert config.telegram.allow_from == ["@alice", 42]
    assert config.agent.model == "true"


def test_duplicate_sections_and_keys_are_errors_naming_both_lines(tmp_path: Path, isolated_home: Path) -> None:
    text = "telegram:\n  owner_id: 42\nagent:\n  model: m\ntelegram:\n  dm_policy: open\n"
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    assert str(err.value) == "config.yaml line 5: duplicate key 'telegram' (first at line 1)"
    with pytest.raises(ConfigError, match=r"line 3: duplicate key 'model' \(first at line 2\)"):
        load_config(_write(tmp_path, "agent:\n  model: a\n  model: b\n"))


def test_empty_sections_mean_their_defaults(tmp_path: Path, isolated_home: Path) -> None:
    config = load_config(_write(tmp_path, "telegram:\n  # owner_id: 42\nagent:\nmemory: {}\n"))
    assert config.telegram.owner_id is None and config.agent.model == Config().agent.model


def test_every_problem_in_the_file_is_listed_on_one_line(tmp_path: Path, isolated_home: Path) -> None:
    text = "agent:\n  max_tokens: lots\n  api_key: sk-ant-secret\ntelegram:\n  dm_polcy: open\n  bot_token: [1]\n"
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    message = str(err.value)
    assert message.startswith("3 problems: ") and "\n" not in message
    assert "config.yaml: agent.max_tokens: expected an integer, got 'lots'" in message
    assert "config.yaml: telegram.dm_polcy: unknown key (did you mean 'dm_policy'?)" in message
    assert "config.yaml: telegram.bot_token: expected a string, got (hidden)" in message


def test_paths_default_under_data_dir(tmp_path: Path, isolated_home: Path) -> None:
    config = load_config(_write(tmp_path, f"storage:\n  data_dir: {tmp_path / 'state'}\n"))
    assert config.storage.database == tmp_path / "state" / "teleton.db"
    assert config.storage.workspace == tmp_path / "state" / "workspace"
    assert config.telegram.session_path == tmp_path / "state" / "telegram.session"


def test_example_config_documents_every_key_with_its_default() -> None:
    # Read as a user's copy is read: a key written twice is an error there (it was, from an edit made twice).
    raw = read_config_file(REPO / "config.example.yaml")
    assert Config.model_validate(raw).model_dump() == Config().model_dump()

    def keys(model: type, prefix: str = "") -> set[str]:
        out = set()
        for name, field in model.model_fields.items():
            if name == "source":
                continue
            annotation = field.annotation
            if isinstance(annotation, type) and hasattr(annotation, "model_fields"):
                out |= keys(annotation, f"{prefix}{name}.")
            else:
                out.add(prefix + name)
        return out

    def present(node: dict, prefix: str = "") -> set[str]:
        out = set()
        for name, value in node.items():
            if isinstance(value, dict) and value:  # an empty mapping ({}) is a setting
                out |= present(value, f"{prefix}{name}.")
            else:
                out.add(prefix + name)
        return out

    assert present(raw) == keys(Config)
    # Every key line carries a one-line comment.
    for line in (REPO / "config.example.yaml").read_text().splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and not stripped.endswith(":"):
            assert " # " in line, f"undocumented key line: {line!r}"


def test_write_config_is_private_and_loads_back(tmp_path: Path, isolated_home: Path) -> None:
    path = tmp_path / "cfg" / "config.yaml"
    write_config(path, {"telegram": {"mode": "bot", "bot_token": "123456:abc"}})
    assert path.stat().st_mode & 0o777 == 0o600
    assert load_config(path).telegram.bot_token == "123456:abc"
    with pytest.raises(ConfigError, match=r"telegram\.mod: unknown key"):
        write_config(path, {"telegram": {"mod": "bot"}})
    assert load_config(path).telegram.mode == "bot"  # the bad write changed nothing


def test_the_parts_default_to_the_schema_numbers() -> None:
    """A part built without a config (a test, a script, `teleton chat` before loading one) behaves as the
    daemon does with an empty config: the schema is the one home of every default."""
    from dataclasses import replace

    from teleton.agent.deps import AgentSettings
    from teleton.memory.embeddings.cached import CachedProvider

    configured = AgentSettings.from_config(Config())
    # Deliberate differences: the daemon turns the slow notice on, and the search weights follow the model.
    bare = replace(AgentSettings(), slow_notice_s=configured.slow_notice_s)
    bare = replace(bare, context=replace(bare.context, params=configured.context.params))
    assert bare == configured
    assert AgentSettings().context.params.min_score == Config().memory.min_score
    cache = CachedProvider.__init__.__kwdefaults__
    assert (cache["ttl_days"], cache["max_entries"]) == (
        Config().embedding.cache_ttl_days,
        Config().embedding.cache_max_entries,
    )
