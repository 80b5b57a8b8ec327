"""`teleton setup`'s voice question: transcribe voice notes locally, which needs the ``voice`` extra.

The wizard never runs pip: when the extra is missing and the answer is yes, it prints the command. A "no"
writes ``media.transcription.provider: off`` rather than keeping ``local``: the owner chose it, so nobody
is then told at every start and with every voice note that the extra is missing (the model still sees that
a voice note arrived, unheard).
"""

from __future__ import annotations

from typing import Any

from teleton.providers import extras

VOICE_EXTRA_SIZE = "about 440 MB"  # installed, measured: docs/dependencies.md, Extras


def ask_voice(questionary: Any, need: Any, existing_media: dict[str, Any]) -> bool | None:
    """Whether to transcribe voice notes locally; None, not asked, when the config already sends them
    elsewhere (an endpoint, Telegram's own)."""
    provider = (existing_media.get("transcription") or {}).get("provider", "local")
    if provider not in ("local", "off"):
        return None
    have = extras.missing("voice") is None
    needs = "" if have else f" (needs {extras.install_command('voice')}, {VOICE_EXTRA_SIZE})"
    return bool(need(questionary.confirm(f"Transcribe voice notes locally?{needs}", default=have).ask()))


def transcription_settings(media: dict[str, Any], local: bool) -> dict[str, Any]:
    """The ``media`` section with the answer written in (the rest of it, and of its transcription, kept)."""
    transcription = {**(media.get("transcription") or {}), "provider": "local" if local else "off"}
    return {**media, "transcription": transcription}


def voice_advice(local: bool | None) -> str | None:
    """What to run after setup for the voice notes asked for, when the extra is not installed yet."""
    if local and extras.missing("voice") is not None:
        return f"to hear them, install the voice extra ({VOICE_EXTRA_SIZE}): {extras.install_command('voice')}"
    return None
