"""The ``media`` section: photos, voice notes and documents read, transcription, voice replies."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from teleton.config.schema_base import ProviderName, Section, yaml_off


class TranscriptionConfig(Section):
    """Who turns voice notes, audio and video notes into text."""

    provider: Literal["local", "telegram", "openai_compatible", "off"] = "local"
    model: str | None = None  # local: null = the packaged model; openai_compatible: e.g. whisper-1
    model_path: Path | None = None  # local: a directory with the model's files instead
    preset: ProviderName | None = None  # openai_compatible: a named server for URL and key (openai, groq...)
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)


class SpeechConfig(Section):
    """Voice replies (off unless media.voice_replies is on): eSpeak NG on this machine, or an OpenAI-compatible
    /audio/speech endpoint."""

    provider: Literal["local", "openai_compatible"] = "local"
    preset: ProviderName | None = "openai"
    base_url: str | None = None
    api_key: str | None = Field(default=None, repr=False)
    model: str = "gpt-4o-mini-tts"
    voice: str = "alloy"


class MediaConfig(Section):
    """Photos, voice notes and documents sent to the agent: read, described, archived (issue 17)."""

    enabled: bool = True
    describe_all: bool = False  # also describe/transcribe media in groups that did not address the agent (cost)
    max_image_mb: float = Field(default=10, gt=0)  # a larger file is never downloaded
    max_audio_mb: float = Field(default=25, gt=0)
    max_document_mb: float = Field(default=20, gt=0)
    max_audio_minutes: float = Field(default=30, gt=0)
    image_max_side: int = Field(default=1568, ge=64)  # pixels: images are downscaled to this before the model
    document_excerpt_chars: int = Field(default=4000, ge=200)  # what the model reads of a document at first
    retention_days: int = Field(default=30, ge=0)  # downloaded media older than this is deleted; 0 = keep
    transcription: TranscriptionConfig = Field(default_factory=TranscriptionConfig)
    voice_replies: Literal["off", "when_spoken_to", "always"] = "off"
    speech: SpeechConfig = Field(default_factory=SpeechConfig)

    @field_validator("voice_replies", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        return yaml_off(value)
