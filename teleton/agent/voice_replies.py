"""Voice replies (``media.voice_replies``): after the text reply reached the chat, the same words are sent
as a voice note — always, or only to someone who spoke to the agent with a voice note or a video note.

The text goes first and stays the record (archived, in the session, searchable); the voice note is extra and
best-effort: a speech server that fails costs a log line, never the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path

import structlog

from teleton.agent.turn import Turn
from teleton.gateway.contract import Gateway
from teleton.media.speech import SpeechClient
from teleton.privacy.paths import chat_dir
from teleton.storage.private_files import write_private_bytes
from teleton.text.lines import reason

log = structlog.get_logger(__name__)


@dataclass
class VoiceReplies:
    mode: str  # when_spoken_to | always ("off": no VoiceReplies at all)
    speech: SpeechClient
    gateway: Gateway
    workspace: Path

    async def after_reply(self, turn: Turn) -> None:
        if not turn.reply.strip() or turn.undelivered or turn.failed:
            return
        if self.mode == "when_spoken_to" and not turn.spoken:
            return
        msg = turn.msg
        try:
            with contextlib.suppress(Exception):  # "recording a voice message…" while it is made: cosmetic
                await self.gateway.typing(msg.chat.id, msg.topic_id, action="record_audio")
            audio = await self.speech.synthesize(turn.reply)
            path = self.workspace / chat_dir("downloads", msg.chat.id) / f"reply-{msg.message_id}.ogg"
            await asyncio.to_thread(write_private_bytes, path, audio, stop_at=self.workspace)
            reply_to = msg.message_id if msg.message_id > 0 else None
            await self.gateway.send_file(msg.chat.id, path, voice_note=True, reply_to=reply_to)
        except Exception as exc:  # extra, never the answer: log and go on
            log.warning("voice_reply_failed", chat_id=msg.chat.id, error=reason(exc, 200))
