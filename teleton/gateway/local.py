"""What the gateways without Telegram share: the terminal of ``teleton chat`` and the daemon's loopback.

Neither has stickers or GIFs, and the media of their messages are local files: one copy of each rule here.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from teleton.gateway.contract import GatewayError, SendsMessages, SentMessage


class TextStandIns(SendsMessages):
    """A sticker or a GIF goes out as a line of text naming it (there is nothing to search for one)."""

    async def send_sticker(self, chat_id: int, emoji: str) -> SentMessage:
        return await self.send_message(chat_id, f"[sticker {emoji}]")

    async def send_gif(self, chat_id: int, query: str) -> SentMessage:
        return await self.send_message(chat_id, f"[GIF {query}]")


async def copy_media(source: Path | None, dest_dir: Path, max_bytes: int, *, failed: str, prefix: str = "") -> Path:
    """``download_media`` of a message whose media is the local file ``source``: copied into ``dest_dir`` (made,
    as Telegram's download does) as ``prefix`` + its name on a worker thread, refused over ``max_bytes``;
    ``failed`` names an OSError in the ``GatewayError``."""
    if source is None:
        raise GatewayError("that message has no media")

    def copy() -> Path:
        size = source.stat().st_size
        if size > max_bytes:
            raise GatewayError(f"media is {size} bytes, over the {max_bytes} byte limit")
        dest_dir.mkdir(parents=True, exist_ok=True)
        return Path(shutil.copyfile(source, dest_dir / f"{prefix}{source.name}"))

    try:
        return await asyncio.to_thread(copy)
    except OSError as exc:
        raise GatewayError(f"{failed} ({exc.strerror or exc})") from None
