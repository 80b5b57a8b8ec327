"""web_fetch: read a public web page as text, without becoming a door into the local network (SSRF).

Each hop's host is resolved here, every address it resolves to must be public (IPv4-mapped and 6to4/Teredo
forms included), and the connection goes to the checked address itself (the host in the Host header and as TLS
SNI): resolving once closes the DNS-rebinding gap. Redirects are followed here, each through the same check,
and the environment's proxies are ignored. The body is streamed and capped, the whole fetch under one
deadline; HTML becomes text with the stdlib ``html.parser``.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

import httpx

from teleton.config.schema import WebFetchConfig, default
from teleton.llm.tool_loop import ToolResult
from teleton.privacy.payload import links
from teleton.privacy.quoting import outside, outside_origin, quote_lines
from teleton.storage.private_files import write_private
from teleton.tools.held import Held, Outgoing
from teleton.tools.outbox import gate
from teleton.tools.registry import Tool, ToolContext, ToolDeps, schema

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
REDIRECTS = (301, 302, 303, 307, 308)
USER_AGENT = "Mozilla/5.0 (compatible; Teleton/0.1; +https://github.com/)"


class FetchRefused(Exception):
    """The URL, an address it resolves to, a redirect or the response is not allowed; the message says why."""


@dataclass(frozen=True)
class FetchSettings:
    timeout_s: float = default(WebFetchConfig, "timeout_s")
    max_bytes: int = default(WebFetchConfig, "max_bytes")
    max_redirects: int = 5
    output_cap: int = 40_000  # characters of extracted text handed to the model
    # TEST ONLY: networks exempt from the address check (a test server on 127.0.0.1). Empty in production;
    # nothing in the config can set it.
    allow_networks: tuple[IPNetwork, ...] = ()
    # TLS trust: True = the system's CAs. Tests pass an SSLContext trusting their own certificate.
    verify: ssl.SSLContext | bool = True

    @classmethod
    def from_config(cls, cfg: WebFetchConfig) -> FetchSettings:
        """From ``config.capabilities.web_fetch``."""
        return cls(timeout_s=cfg.timeout_s, max_bytes=cfg.max_bytes)


@dataclass(frozen=True)
class FetchResult:
    url: str
    status: int
    content_type: str
    text: str
    truncated: bool


# -- the address rule (pure) -------------------------------------------------------------------------
def address_refusal(ip: IPAddress) -> str | None:
    """Why ``ip`` may not be fetched from, or None if it is a public unicast address."""
    if isinstance(ip, ipaddress.IPv6Address):
        for wrapped in (ip.ipv4_mapped, ip.sixtofour, (ip.teredo or (None, None))[1]):
            if wrapped is not None:
                inner = address_refusal(wrapped)
                if inner:
                    return f"{inner} (wrapped in {ip})"
    checks = (
        ("unspecified", ip.is_unspecified),
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("private", ip.is_private),
        ("multicast", ip.is_multicast),
        ("reserved", ip.is_reserved),
        ("not globally routable", not ip.is_global),
    )
    for name, hit in checks:
        if hit:
            return f"{ip} is a {name} address"
    return None


def _allowed(ip: IPAddress, allow: Sequence[IPNetwork]) -> bool:
    return any(ip.version == net.version and ip in net for net in allow)


async def resolve_checked(host: str, port: int, allow: Sequence[IPNetwork] = ()) -> IPAddress:
    """Resolve ``host`` and return an address to connect to; refuse if ANY resolved address is not public."""
    try:
        literal: IPAddress | None = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        literal = None
    if literal is not None:
        found = [literal]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise FetchRefused(f"cannot resolve {host}: {exc.strerror}") from exc
        found = list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos))
    if not found:
        raise FetchRefused(f"{host} has no address")
    for ip in found:
        problem = None if _allowed(ip, allow) else address_refusal(ip)
        if problem:
            raise FetchRefused(f"refusing {host}: {problem}")
    return found[0]


# -- fetching ----------------------------------------------------------------------------------------
def _check_url(url: httpx.URL) -> None:
    if url.scheme not in ("http", "https"):
        raise FetchRefused(f"only http and https URLs can be fetched, not {url.scheme or 'this'}")
    if not url.host:
        raise FetchRefused("the URL has no host")
    if url.userinfo:
        raise FetchRefused("URLs with a user name or password are not fetched")


async def _one_hop(client: httpx.AsyncClient, url: httpx.URL, settings: FetchSettings) -> httpx.Response:
    """Request ``url`` at its checked address; the response is open for streaming (caller closes it)."""
    _check_url(url)
    host = url.raw_host.decode("ascii")
    port = url.port or (443 if url.scheme == "https" else 80)
    ip = await resolve_checked(host, port, settings.allow_networks)
    target = url.copy_with(host=str(ip))
    extensions: dict[str, Any] = {}
    if url.scheme == "https":
        extensions["sni_hostname"] = host  # certificate checked against the name, not the IP
    headers = {
        "Host": url.netloc.decode("ascii"),
        "User-Agent": USER_AGENT,
        "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5",
    }
    request = client.build_request("GET", target, headers=headers, extensions=extensions)
    return await client.send(request, stream=True, follow_redirects=False)


async def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


async def fetch(url: str, settings: FetchSettings = FetchSettings()) -> FetchResult:
    """Fetch ``url`` (following checked redirects) and return its readable text."""
    try:
        current = httpx.URL(url.strip())
    except httpx.InvalidURL as exc:
        raise FetchRefused(f"not a valid URL: {exc}") from exc
    timeout = httpx.Timeout(settings.timeout_s)
    async with (
        asyncio.timeout(settings.timeout_s),
        httpx.AsyncClient(timeout=timeout, trust_env=False, follow_redirects=False, verify=settings.verify) as client,
    ):
        for _ in range(settings.max_redirects + 1):
            response = await _one_hop(client, current, settings)
            try:
                if response.status_code in REDIRECTS and "location" in response.headers:
                    current = current.join(response.headers["location"])
                    continue
                body, truncated = await _read_capped(response, settings.max_bytes)
            finally:
                await response.aclose()
            content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
            # Parsing a 2 MB page takes a while: off the event loop.
            text = await asyncio.to_thread(body_text, body, content_type, response.charset_encoding)
            return FetchResult(str(current), response.status_code, content_type, text, truncated)
    raise FetchRefused(f"more than {settings.max_redirects} redirects")


def body_text(body: bytes, content_type: str, charset: str | None) -> str:
    if content_type and not (content_type.startswith("text/") or content_type in _TEXTUAL):
        raise FetchRefused(f"the page is {content_type}, not text; it was not downloaded")
    try:
        text = body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    if content_type in ("text/html", "application/xhtml+xml") or (not content_type and "<html" in text[:2000].lower()):
        return html_to_text(text)
    return text


_TEXTUAL = frozenset(
    {
        "application/json",
        "application/xml",
        "application/xhtml+xml",
        "application/rss+xml",
        "application/atom+xml",
        "application/javascript",
    }
)


# -- HTML to text ------------------------------------------------------------------------------------
_SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe", "canvas"})
_BLOCK = frozenset(
    {
        "p",
        "div",
        "br",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "tr",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "nav",
        "blockquote",
        "pre",
        "hr",
        "dd",
        "dt",
    }
)


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title: list[str] = []
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIP:
            self._skip += 1
        elif tag in _BLOCK:
            self.parts.append("\n")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title.append(data)
        elif not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.parts).splitlines()]
    body = "\n".join(line for line in lines if line)
    title = " ".join("".join(parser.title).split())
    return f"# {title}\n\n{body}" if title else body


# -- the tool ----------------------------------------------------------------------------------------
def typed_url(url: str, typed: str) -> bool:
    """Whether ``url`` is exactly a link the speaker typed (a bare ``example.org/x`` typed counts for its
    https address): then it carries nothing but their own words, whatever else the turn was shown."""
    found = {link.url for link in links(typed)}
    return url in found or any(url == f"https://{u}" for u in found if "://" not in u)


def page_text(result: FetchResult, settings: FetchSettings) -> tuple[str, bool]:
    """A fetched page as the model reads it: outside content, quoted with its origin, never instructions."""
    text = result.text
    notes = []
    if result.truncated:
        notes.append(f"page larger than {settings.max_bytes} bytes; only the start was read")
    if len(text) > settings.output_cap:
        text = text[: settings.output_cap]
        notes.append(f"text cut to {settings.output_cap} characters")
    head = f"{result.url} (HTTP {result.status}, {result.content_type or 'unknown type'})"
    tail = f"\n[{'; '.join(notes)}]" if notes else ""
    host = httpx.URL(result.url).host
    return f"{head}\n\n{quote_lines(text, outside_origin(outside('web', host)))}{tail}", result.status >= 400


async def _fetch(url: str, settings: FetchSettings) -> FetchResult | ToolResult:
    try:
        return await fetch(url, settings)
    except FetchRefused as exc:
        return ToolResult.error(str(exc))
    except TimeoutError:
        return ToolResult.error(f"the page did not load within {settings.timeout_s:g} s")
    except httpx.HTTPError as exc:
        return ToolResult.error(f"fetch failed: {type(exc).__name__}: {exc}")


def web_fetch_tools(settings: FetchSettings = FetchSettings()) -> list[Tool]:
    async def web_fetch(args: dict[str, Any], ctx: ToolContext) -> str | ToolResult:
        url = args["url"].strip()
        # Decided before the host is even looked up: a host name is payload too.
        _, stop = await gate(ctx, Outgoing("fetch", url.encode(), typed=typed_url(url, ctx.typed), tool="web_fetch"))
        if stop is not None:
            return stop
        result = await _fetch(url, settings)
        if isinstance(result, ToolResult):
            return result
        ctx.saw(outside("web", httpx.URL(result.url).host))
        text, failed = page_text(result, settings)
        return ToolResult(text, is_error=failed)

    async def release_fetch(item: Held, deps: ToolDeps) -> str:
        """A fetch the owner approved: exactly the address shown; the page is kept for the owner alone."""
        result = await _fetch(item.text, settings)
        if isinstance(result, ToolResult):
            raise FetchRefused(result.content)
        text, _ = page_text(result, settings)
        rel = f"fetched/held-{item.id}.md"
        await asyncio.to_thread(write_private, deps.workspace / rel, text, stop_at=deps.workspace)
        return f"fetched {result.url} (HTTP {result.status}); the page is in {rel}, which only you can read"

    return [
        Tool(
            name="web_fetch",
            description=(
                "Fetch a web page or URL from the internet and read its text (articles, docs, news, links "
                "someone shared). Public http(s) addresses only."
            ),
            input_schema=schema(
                {
                    "url": {
                        "type": "string",
                        "minLength": 4,
                        "maxLength": 4000,
                        "description": "the http or https URL to open",
                    }
                },
                ("url",),
            ),
            handler=web_fetch,
            category="web",
            release=release_fetch,
        )
    ]
