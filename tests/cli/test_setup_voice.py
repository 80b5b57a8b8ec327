"""`teleton setup` offers the voice extra: a yes without it prints the command to run (pip is never run from
the wizard) and keeps local transcription; a no turns transcription off; a scripted setup asks nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from teleton.config import load_config
from teleton.providers.extras import install_command
from tests.cli.test_setup_login import DOWN, ENTER, _cli, _keys, _wizard
from tests.conftest import without_extra

COMMAND = install_command("voice")


def bot_answers(voice: str) -> str:
    return _keys(
        DOWN + ENTER,  # mode: bot
        "4242" + ENTER,  # api_id
        "cd" * 16 + ENTER,  # api_hash
        "123456:" + "Z" * 35 + ENTER,  # bot token
        "777" + ENTER,  # owner id
        ENTER,  # dm_policy
        ENTER,  # group_policy
        ENTER,  # model provider: anthropic
        "sk-ant-test" + ENTER,  # Anthropic key
        voice,  # "Transcribe voice notes locally? (needs <install_command('voice')>, about 440 MB)"
        "n",  # serve the dashboard: no
    )


@pytest.mark.parametrize(("answer", "provider"), [("y", "local"), ("n", "off")])
def test_the_wizard_offers_the_voice_extra_and_prints_the_command_for_a_yes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str, provider: str
) -> None:
    without_extra(monkeypatch, "voice")
    result, path = _wizard(tmp_path, monkeypatch, bot_answers(answer), "--skip-login")
    assert result.exit_code == 0, result.output
    assert load_config(path).media.transcription.provider == provider
    advice = [line for line in result.output.splitlines() if COMMAND in line]
    if answer == "y":
        assert advice == [f"voice notes: to hear them, install the voice extra (about 440 MB): {COMMAND}"]
    else:
        assert advice == []


def test_a_transcription_endpoint_already_configured_is_not_asked_about(tmp_path: Path, monkeypatch: Any) -> None:
    without_extra(monkeypatch, "voice")
    typed = _keys(DOWN + DOWN + ENTER, ENTER, "sk-ant-test" + ENTER)  # terminal only; Anthropic; its key
    result, path = _wizard(tmp_path, monkeypatch, typed)
    assert result.exit_code == 0, result.output
    assert COMMAND not in result.output  # terminal only: no voice notes arrive there, nothing asked
    groq = {"provider": "openai_compatible", "preset": "groq"}
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}, "media": {"transcription": groq}}))
    result, path = _wizard_keeping(tmp_path, monkeypatch, bot_answers(""))
    assert result.exit_code == 0, result.output
    assert load_config(path).media.transcription.provider == "openai_compatible"


def test_a_scripted_setup_asks_nothing_and_keeps_the_default(tmp_path: Path, monkeypatch: Any) -> None:
    without_extra(monkeypatch, "voice")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"storage": {"data_dir": str(tmp_path / "data")}}))
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    result = CliRunner().invoke(_cli(), ["setup", "--non-interactive", "--mode", "terminal"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert COMMAND not in result.output and "media" not in yaml.safe_load(path.read_text())


def _wizard_keeping(tmp_path: Path, monkeypatch: Any, keys_typed: str) -> tuple[Any, Path]:
    """`_wizard` over the config already at ``tmp_path / config.yaml`` (``_wizard`` starts a new one)."""
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from teleton.cli import setup_provider

    monkeypatch.setattr(setup_provider, "LOCAL_URLS", {})
    path = tmp_path / "config.yaml"
    monkeypatch.setenv("TELETON_CONFIG", str(path))
    with create_pipe_input() as keys:
        keys.send_text(keys_typed)
        with create_app_session(input=keys, output=DummyOutput()):
            return CliRunner().invoke(_cli(), ["setup", "--skip-login"], terminal_width=200), path
