"""Text to speech for voice replies: an OpenAI-compatible ``POST /audio/speech`` (OpenAI, or a local server
such as one running Kokoro or Piper behind that API), or the ``local`` eSpeak NG voice
(``teleton/media/speech_local.py``; Piper's and Coqui's voices download from a hub, so they are no offline
default). ``speakable`` is the one rule for what of a reply is read aloud, for both.

The answer is asked for as Opus in an Ogg container: what Telegram plays as a voice note.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from teleton.config.presets import PresetError, service_endpoint
from teleton.media.errors import MediaError
from teleton.media.speakable import MAX_INPUT_CHARS, speakable
from teleton.providers.extras import MissingExtra
from teleton.providers.pinned_files import ModelFilesError


class SpeechClient:
    name = "openai_compatible"

    def __init__(self, base_url: str, *, api_key: str | None, model: str, voice: str, timeout_s: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.model, self.voice, self.base_url = model, voice, base_url.rstrip("/")
        self._client = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout_s)

    async def synthesize(self, text: str) -> bytes:
        """``text`` (cut to what one request takes) spoken, as Ogg/Opus bytes; MediaError in one line."""
        words = speakable(text)[:MAX_INPUT_CHARS]
        body = {"model": self.model, "voice": self.voice, "input": words, "response_format": "opus"}
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


def speech_client(speech: Any, env: Mapping[str, str] | None = None) -> Any:
    """The client ``media.speech`` describes; ``ValueError`` in one line naming the key to fix, or
    ``MissingExtra`` (its own line) when the local voice's extra is not installed."""
    if speech.provider == "local":
        from teleton.media.speech_local import LocalSpeech  # it imports this module

        try:
            return LocalSpeech()
        except MissingExtra:
            raise  # not a key to fix: the caller names the extra (doctor FAIL, a warning at start)
        except ModelFilesError as exc:
            raise ValueError(f"media.speech.provider: local: {exc}") from None
    try:
        base_url, key, _ = service_endpoint(
            "media.speech",
            name=speech.preset,
            base_url=speech.base_url,
            api_key=speech.api_key,
            example="or a preset such as openai",
            env=env,
        )
    except PresetError as exc:
        raise ValueError(str(exc)) from None
    return SpeechClient(base_url, api_key=key, model=speech.model, voice=speech.voice)


def _message(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
        text = error.get("message") if isinstance(error, dict) else str(error)
    except ValueError:
        text = response.text
    return " ".join(str(text or "no message").split())[:200]
