"""Encrypted archives: a passphrase (Argon2id, memory-hard) or a key file, and ChaCha20-Poly1305 over the
archive in 64 KiB chunks, each authenticated with its place (the STREAM construction age uses: a counter and
a last-chunk flag in the nonce), so a flipped byte, a cut-off end or a reordered chunk fails to decrypt, as
a wrong passphrase does. The primitives are ``cryptography``'s; only the framing is ours (docs/operations.md).
"""

from __future__ import annotations

import base64
import hmac
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"teleton-backup-sealed/1\n"
CHUNK = 64 * 1024
TAG = 16
MIN_KEY_FILE = 32
# RFC 9106's second recommended choice: 64 MiB, 3 passes (about 0.3 s here).
ARGON2 = {"memory_cost": 64 * 1024, "iterations": 3, "lanes": 4}
# A header is read before it is authenticated: its costs are bounded, or a crafted one takes all memory.
ARGON2_LIMITS = {"memory_cost": 1024 * 1024, "iterations": 16, "lanes": 16}


class SealError(Exception):
    """A key that does not open the archive, or an archive that was changed: one line, nothing written."""


@dataclass(frozen=True)
class Key:
    """What opens an archive: a passphrase or the bytes of a key file (``source`` names it in messages)."""

    secret: bytes
    passphrase: bool
    source: str

    @classmethod
    def from_passphrase(cls, passphrase: str, source: str) -> Key:
        if not passphrase:
            raise SealError(f"{source} is empty: an empty passphrase would protect nothing")
        return cls(passphrase.encode(), True, source)

    @classmethod
    def from_file(cls, path: Path) -> Key:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise SealError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
        if len(data) < MIN_KEY_FILE:
            raise SealError(
                f"the key file {path} holds {len(data)} bytes, at least {MIN_KEY_FILE} needed "
                "(make one: head -c 32 /dev/urandom > FILE; chmod 600 FILE)"
            )
        return cls(data, False, str(path))


def key_from(passphrase_env: str | None, key_file: Path | None, env: Mapping[str, str] | None = None) -> Key | None:
    """The key the config names (None: archives are written in the clear)."""
    env = os.environ if env is None else env
    if key_file is not None:
        return Key.from_file(key_file)
    if passphrase_env:
        value = env.get(passphrase_env)
        if value is None:
            raise SealError(f"backup.passphrase_env names {passphrase_env}, which is not set in the environment")
        return Key.from_passphrase(value, passphrase_env)
    return None


def is_sealed(head: bytes) -> bool:
    return head.startswith(MAGIC)


def _master(key: Key, header: Mapping[str, object]) -> bytes:
    salt = base64.b64decode(str(header["salt"]))
    if key.passphrase:
        if header.get("kdf") != "argon2id":
            raise SealError(f"this archive was sealed with a key file, not a passphrase (given: {key.source})")
        cost = {name: int(header[name]) for name in ARGON2}  # type: ignore[call-overload]
        if any(cost[name] > limit for name, limit in ARGON2_LIMITS.items()):
            raise SealError("the archive's header asks for a key derivation far costlier than Teleton writes")
        return Argon2id(salt=salt, length=32, **cost).derive(key.secret)
    if header.get("kdf") != "key-file":
        raise SealError(f"this archive was sealed with a passphrase, not a key file (given: {key.source})")
    return _expand(key.secret, salt, b"teleton backup")


def _expand(secret: bytes, salt: bytes | None, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(secret)


def _keys(key: Key, header: Mapping[str, object]) -> tuple[bytes, str]:
    """(the chunks' key, the check value the header carries): a wrong key is told apart from a changed file."""
    master = _master(key, header)
    check = base64.b64encode(_expand(master, None, b"teleton backup check")[:16]).decode()
    return _expand(master, None, b"teleton backup chunks"), check


def _nonce(counter: int, last: bool) -> bytes:
    return counter.to_bytes(11, "big") + (b"\x01" if last else b"\x00")


class SealedWriter:
    """A write-only file object: what is written to it reaches ``out`` encrypted. ``close()`` seals the end
    (without it the archive reads as cut off)."""

    def __init__(self, out: BinaryIO, key: Key) -> None:
        header: dict[str, object] = {"kdf": "argon2id" if key.passphrase else "key-file"}
        header["salt"] = base64.b64encode(os.urandom(16)).decode()
        if key.passphrase:
            header.update(ARGON2)
        chunk_key, header["check"] = _keys(key, header)
        self._header = json.dumps(header, sort_keys=True).encode() + b"\n"
        self._aead = ChaCha20Poly1305(chunk_key)
        self._out = out
        self._buffer = bytearray()
        self._counter = 0
        self.closed = False
        out.write(MAGIC + self._header)

    def write(self, data: bytes) -> int:
        self._buffer += data
        while len(self._buffer) > CHUNK:  # ">": the last chunk is sealed by close, never left empty-handed
            self._seal(bytes(self._buffer[:CHUNK]), last=False)
            del self._buffer[:CHUNK]
        return len(data)

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        if not self.closed:
            self._seal(bytes(self._buffer), last=True)
            self._buffer.clear()
            self.closed = True

    def _seal(self, chunk: bytes, *, last: bool) -> None:
        self._out.write(self._aead.encrypt(_nonce(self._counter, last), chunk, self._header))
        self._counter += 1


class SealedReader:
    """A read-only file object over a sealed archive; every chunk is checked before a byte of it is given."""

    def __init__(self, source: BinaryIO, key: Key) -> None:
        if source.read(len(MAGIC)) != MAGIC:
            raise SealError("not an encrypted Teleton archive")
        self._header = source.readline(4096)
        try:
            header = json.loads(self._header)
            chunk_key, check = _keys(key, header)
        except (ValueError, KeyError, TypeError):
            raise SealError("the archive's header is damaged") from None
        if not hmac.compare_digest(check, str(header.get("check"))):
            raise SealError(f"{key.source} does not open this archive: a wrong passphrase or key")
        self._aead = ChaCha20Poly1305(chunk_key)
        self._source = source
        self._counter = 0
        self._pending = source.read(CHUNK + TAG)
        self._plain = bytearray()
        self._done = False

    def read(self, size: int = -1) -> bytes:
        while not self._done and (size < 0 or len(self._plain) < size):
            self._open_next()
        if size < 0:
            size = len(self._plain)
        out = bytes(self._plain[:size])
        del self._plain[:size]
        return out

    def _open_next(self) -> None:
        following = self._source.read(CHUNK + TAG)
        last = not following
        try:
            self._plain += self._aead.decrypt(_nonce(self._counter, last), self._pending, self._header)
        except InvalidTag:
            raise SealError(
                f"the archive is damaged or cut off near byte {self._counter * (CHUNK + TAG)}: it was changed "
                "after it was written"
            ) from None
        self._counter += 1
        self._pending = following
        self._done = last
