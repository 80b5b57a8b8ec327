"""The two stages around a turn's media: what came in is read before anything else (a photo, voice note or
document becomes text, ``media_reader``), and what goes out may be spoken after the reply (``voice_replies``).
"""

from __future__ import annotations

from dataclasses import replace

from teleton.agent.media_reader import MediaReader, family
from teleton.agent.turn import Turn
from teleton.agent.voice_replies import VoiceReplies
from teleton.agent.window import oversize
from teleton.memory.feed import archive as fa
from teleton.privacy.quoting import outside, outside_origin, quote_lines


async def read_media(reader: MediaReader | None, turn: Turn) -> None:
    """The turn's stage: the message's file read into its text (and archive) and, for an image, the request."""
    msg = turn.msg
    if reader is None or msg.media is None:
        return
    reading = await reader.read(msg)
    if reading is None:
        return
    # A file's or a picture's words are not the sender's: this turn is steered by them, and the archive keeps
    # them quoted with their origin, so every later reader (recent messages, a search, a reply) is too.
    spoken = msg.media.kind in ("voice", "video_note")
    origin = outside("document" if family(msg.media) == "document" else msg.media.kind, msg.media.file_name)
    kept = reading.text if spoken else quote_lines(reading.text, outside_origin(origin))
    if reading.archive:  # re-indexed and re-embedded by the archive's triggers
        await reader.db.write(lambda conn: fa.set_text(conn, msg.chat.id, msg.message_id, kept))
    turn.msg = replace(msg, text=reading.text, media=None, media_kind=None)  # read: nothing else is attached
    if not spoken:
        turn.taint.saw(origin)
    if reading.image is not None:
        turn.images.append(reading.image)
    turn.spoken = spoken
    excerpt = reader.settings.excerpt_chars
    if family(msg.media) == "document" and len(reading.text) > excerpt:  # the rest: a workspace file to read
        turn.msg = await oversize.shorten(reader.workspace, turn.msg, excerpt)


async def speak_reply(voice: VoiceReplies | None, turn: Turn) -> None:
    """The turn's stage after the reply (nothing when voice replies are off)."""
    if voice is not None:
        await voice.after_reply(turn)
