"""Who may use the dashboard, and what every response carries (issue 35).

One secret, ``web.token``, in the 0600 config: the login page takes it and sets a session cookie derived from
it (HttpOnly, SameSite=Strict), so changing the token logs everyone out. Every request's Host must be one
the dashboard serves (``allowed_hosts``: DNS rebinding points a foreign name at 127.0.0.1, and its Host gives
it away); every POST must come from our own origin (its Origin, or ``Sec-Fetch-Site: same-origin``) and, once
logged in, carry the CSRF token of the form. Beyond this machine the token must be hard to guess
(``check_bind``), and wrong ones are slowed per client (``throttle``).
Every response carries a CSP without inline script, no referrer, no framing and no caching.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from pydantic import ValidationError

from teleton.config.schema import WebConfig, is_local_host

COOKIE = "teleton_session"
HEADERS = {
    "content-security-policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    ),
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class BindRefused(Exception):
    """The dashboard may not listen where it was asked to; ``str(exc)`` is the one line."""


def check_bind(host: str, token: str | None) -> None:
    """Listening beyond this machine needs a token the owner chose, of 128 bits or more: the config's own rule
    (``WebConfig``'s, in one place), also for a dashboard started without ``web.enabled`` (``teleton dashboard
    --host``). The data dir's token file never serves beyond this machine: ``token`` is ``web.token``."""
    try:
        WebConfig(enabled=True, host=host, token=token)
    except ValidationError as exc:
        raise BindRefused("; ".join(str(e.get("ctx", {}).get("error", e["msg"])) for e in exc.errors())) from None


@dataclass(frozen=True)
class Guard:
    token: str
    hosts: frozenset[str]  # Host header values accepted, lowercased (with their port where one is used)

    @classmethod
    def build(cls, token: str, host: str, port: int, trusted: Iterable[str] = ()) -> Guard:
        names = {host, "127.0.0.1", "localhost", "[::1]"} if is_local_host(host) else {host}
        hosts = {f"{name}:{port}" for name in names} | {t.lower() for t in trusted}
        return cls(token, frozenset(h.lower() for h in hosts))

    def _derive(self, purpose: str) -> str:
        return hmac.new(self.token.encode(), purpose.encode(), hashlib.sha256).hexdigest()

    @property
    def session(self) -> str:
        return self._derive("session")

    @property
    def csrf(self) -> str:
        return self._derive("csrf")

    def host_ok(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.hosts

    def origin_ok(self, origin: str | None, host: str | None, fetch_site: str | None) -> bool:
        """A POST from our own pages. Browsers send its Origin; under ``Referrer-Policy: no-referrer`` that is
        ``null``, and then ``Sec-Fetch-Site`` (which no page can set) says whether it came from our origin."""
        if not self.host_ok(host):
            return False
        if origin not in (None, "null"):
            return urlsplit(origin).netloc.lower() == (host or "").lower()
        return fetch_site == "same-origin"

    def logged_in(self, cookie: str | None) -> bool:
        return cookie is not None and hmac.compare_digest(cookie, self.session)

    def token_ok(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), self.token.encode())

    def csrf_ok(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given, self.csrf)
