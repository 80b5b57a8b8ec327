"""Text to speech for voice replies: an OpenAI-compatible ``POST /audio/speech`` (OpenAI, or a local server
such as one running Kokoro or Piper behind that API). No TTS that installs offline from a package fits here
(Piper's voices and Coqui's models download from a hub at first use), so this is the one implementation.

The answer is asked for as Opus in an Ogg container: what Telegram plays as a voice note.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import httpx

from teleton.llm.presets import PresetError, preset
from teleton.media.errors import MediaError

MAX_INPUT_CHARS = 4096  # OpenAI's limit for one request


class SpeechClient:
    def __init__(self, base_url: str, *, api_key: str | None, model: str, voice: str, timeout_s: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model, self.voice = model, voice
        self._client = httpx.AsyncClient(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)

    async def synthesize(self, text: str) -> bytes:
        """``text`` (cut to what one request takes) spoken, as Ogg/Opus bytes; MediaError in one line."""
        body = {"model": self.model, "voice": self.voice, "input": text[:MAX_INPUT_CHARS], "response_format": "opus"}
        try:
            response = await self._client.post("/audio/speech", json=body)
        except httpx.HTTPError as exc:
            raise MediaError(f"speech: cannot reach {self._client.base_url} ({type(exc).__name__})") from None
        if response.status_code != 200:
            raise MediaError(f"speech: the server answered {response.status_code} ({_message(response)})")
        if not response.content:
            raise MediaError("speech: the server answered with no audio")
        return response.content

    async def aclose(self) -> None:
        await self._client.aclose()


def speech_client(speech: Any, env: Mapping[str, str] | None = None) -> SpeechClient:
    """The client ``media.speech`` describes; ``ValueError`` in one line naming the key to fix."""
    env = os.environ if env is None else env
    base_url, key_env = speech.base_url, None
    if speech.preset:
        try:
            p = preset(speech.preset)
        except PresetError:
            raise ValueError(f"media.speech.preset: unknown preset {speech.preset!r}") from None
        base_url, key_env = base_url or p.base_url, p.key_env
    if not base_url:
        raise ValueError("media.speech.base_url: required (or a preset such as openai)")
    key = speech.api_key or (env.get(key_env) if key_env else None)
    if key_env and not key:
        raise ValueError(f"media.speech.api_key: required for {speech.preset} (set {key_env})")
    return SpeechClient(base_url, api_key=key, model=speech.model, voice=speech.voice)


def _message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        text = error.get("message") if isinstance(error, dict) else str(error)
    except ValueError:
        text = response.text
    return " ".join(str(text or "no message").split())[:200]
