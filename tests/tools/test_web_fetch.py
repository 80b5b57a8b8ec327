"""web_fetch: SSRF refusals (literal IPs, names, every redirect hop), text extraction and caps.

The only server is one this test starts on 127.0.0.1; it is reachable solely through the test-only
``allow_networks`` parameter, and a redirect it serves to 169.254.169.254 must still be refused.
"""

from __future__ import annotations

import io
import ipaddress
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import httpx
import pytest
from rich.console import Console

from teleton.cli.terminal_gateway import TerminalGateway
from teleton.tools.families.web_fetch import (
    FetchRefused,
    FetchSettings,
    address_refusal,
    fetch,
    html_to_text,
    web_fetch_tools,
)
from teleton.tools.outbox import Outbox, OutboxSettings
from teleton.tools.registry import ToolDeps, ToolRegistry
from tests.tools.conftest import DM, call, make_ctx

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"),)
PAGE = """<html><head><title>Trip  notes</title><style>body{color:red}</style>
<script>var secret = "do not show";</script></head>
<body><h1>Alps</h1><p>We leave on <b>Friday</b>.</p><ul><li>boots</li><li>tent</li></ul></body></html>"""


class Handler(BaseHTTPRequestHandler):
    hosts: ClassVar[list[str]] = []
    paths: ClassVar[list[str]] = []
    # /slow answers only once this is set: a client that waited for it, instead of its own timeout, would hang.
    release_slow: ClassVar[threading.Event] = threading.Event()

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        Handler.hosts.append(self.headers.get("Host", ""))
        Handler.paths.append(self.path)
        port = self.server.server_address[1]
        routes = {
            "/page": lambda: self._send(200, PAGE.encode(), "text/html; charset=utf-8"),
            "/page?q=4711": lambda: self._send(200, PAGE.encode(), "text/html; charset=utf-8"),
            "/to-metadata": lambda: self._redirect("http://169.254.169.254/latest/meta-data/"),
            "/to-page": lambda: self._redirect(f"http://localhost:{port}/page"),
            "/to-relative": lambda: self._redirect("/page"),
            "/to-ten": lambda: self._redirect("http://10.1.2.3/admin"),
            "/loop": lambda: self._redirect("/loop"),
            "/big": lambda: self._send(200, b"a" * 50_000, "text/plain"),
            "/binary": lambda: self._send(200, b"\x89PNG....", "image/png"),
            "/slow": self._slow,
        }
        routes.get(self.path, lambda: self._send(404, b"not found", "text/plain"))()

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _slow(self) -> None:
        Handler.release_slow.wait(60)  # a hang guard only: the test sets it
        try:
            self._send(200, b"late", "text/plain")
        except OSError:  # the client gave up first, as it should
            pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


TEST_ONLY = FetchSettings(timeout_s=60, allow_networks=LOOPBACK)  # a hang guard: loopback answers at once


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:{port}/page",
        "http://localhost:{port}/page",
        "http://[::1]:{port}/page",
        "http://10.0.0.5/",
        "http://10.255.1.1:8080/x",
        "http://192.168.1.1/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:127.0.0.1]:{port}/page",
        "http://0.0.0.0:{port}/page",
        "http://100.64.0.1/",
    ],
)
async def test_private_addresses_are_refused_by_default(server: str, url: str) -> None:
    port = server.rsplit(":", 1)[1]
    with pytest.raises(FetchRefused):
        await fetch(url.format(port=port), FetchSettings(timeout_s=5))
    Handler.hosts.clear()


async def test_allowlisted_test_server_is_fetched_and_html_becomes_text(server: str) -> None:
    result = await fetch(f"{server}/page", TEST_ONLY)
    assert result.status == 200
    assert result.text.startswith("# Trip notes")
    assert "We leave on Friday." in result.text and "- boots" in result.text
    assert "secret" not in result.text and "color" not in result.text


async def test_redirect_to_metadata_address_is_refused_even_with_the_test_allowlist(server: str) -> None:
    with pytest.raises(FetchRefused, match=r"169\.254\.169\.254"):
        await fetch(f"{server}/to-metadata", TEST_ONLY)
    with pytest.raises(FetchRefused, match=r"10\.1\.2\.3"):
        await fetch(f"{server}/to-ten", TEST_ONLY)


async def test_redirects_are_followed_hop_by_hop_with_the_name_in_the_host_header(server: str) -> None:
    Handler.hosts.clear()
    port = server.rsplit(":", 1)[1]
    result = await fetch(f"{server}/to-page", TEST_ONLY)
    assert result.url == f"http://localhost:{port}/page" and "Friday" in result.text
    # We connected to the resolved, checked IP; the server still saw the name it was asked by.
    assert Handler.hosts == [f"127.0.0.1:{port}", f"localhost:{port}"]
    assert "Friday" in (await fetch(f"{server}/to-relative", TEST_ONLY)).text
    with pytest.raises(FetchRefused, match="redirects"):
        await fetch(f"{server}/loop", TEST_ONLY)


async def test_size_and_time_caps_and_non_text(server: str) -> None:
    result = await fetch(f"{server}/big", FetchSettings(max_bytes=1000, allow_networks=LOOPBACK))
    assert result.truncated and len(result.text) == 1000
    Handler.release_slow.clear()
    try:
        # /slow never answers while this runs: only the client's own timeout can end the fetch.
        with pytest.raises(TimeoutError):
            await fetch(f"{server}/slow", FetchSettings(timeout_s=0.3, allow_networks=LOOPBACK))
    finally:
        Handler.release_slow.set()
    with pytest.raises(FetchRefused, match="image/png"):
        await fetch(f"{server}/binary", TEST_ONLY)


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/", "http://user:pw@example.com/", "nope"])
async def test_bad_urls(url: str) -> None:
    with pytest.raises(FetchRefused):
        await fetch(url)


@pytest.mark.parametrize(
    "address, refused",
    [
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.0.1", True),
        ("169.254.169.254", True),
        ("100.64.0.1", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("240.0.0.1", True),
        ("255.255.255.255", True),
        ("::1", True),
        ("::", True),
        ("fe80::1", True),
        ("fc00::1", True),
        ("ff02::1", True),
        ("::ffff:10.0.0.1", True),
        ("::ffff:169.254.169.254", True),
        ("2002:a00:1::", True),  # 6to4 wrapping 10.0.0.1
        ("8.8.8.8", False),
        ("93.184.216.34", False),
        ("2606:4700:4700::1111", False),
    ],
)
def test_address_rule(address: str, refused: bool) -> None:
    assert (address_refusal(ipaddress.ip_address(address)) is not None) is refused


def test_html_to_text_handles_broken_markup() -> None:
    assert html_to_text("<p>a<p>b</div><script>x") == "a\nb"


async def test_the_tool_reports_refusals_as_errors(server: str, deps: ToolDeps) -> None:
    registry = ToolRegistry(web_fetch_tools())  # production settings: no allowlist
    result = await call(registry, make_ctx(deps, DM, admin=True), "web_fetch", url=f"{server}/page")
    assert result.is_error and "loopback" in result.content
    allowed = ToolRegistry(web_fetch_tools(FetchSettings(allow_networks=LOOPBACK, output_cap=20)))
    result = await call(allowed, make_ctx(deps, DM, admin=True), "web_fetch", url=f"{server}/page")
    assert not result.is_error and "text cut to 20 characters" in result.content


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, ssl.SSLContext]]:
    """HTTPS on 127.0.0.1 with a self-signed certificate for the NAME localhost only (no IP in it)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.socket = server_ctx.wrap_socket(httpd.socket, server_side=True)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1], ssl.create_default_context(cafile=str(cert))
    httpd.shutdown()
    httpd.server_close()


async def test_https_connects_to_the_checked_ip_but_verifies_the_name(tls_server) -> None:
    port, trust = tls_server
    settings = FetchSettings(timeout_s=60, allow_networks=LOOPBACK, verify=trust)
    result = await fetch(f"https://localhost:{port}/page", settings)
    assert result.status == 200 and "Friday" in result.text
    # The certificate names localhost, not 127.0.0.1: verification is on and uses the URL's name.
    with pytest.raises(httpx.ConnectError):
        await fetch(f"https://127.0.0.1:{port}/page", settings)


async def test_a_page_is_outside_content_and_steers_what_the_turn_fetches_next(server: str, deps: ToolDeps) -> None:
    """Issue 29: a fetched page is quoted as data with its origin and taints the turn; after it, only a URL
    the speaker typed goes out (with no outbox here nobody could approve anything else: refused)."""
    registry = ToolRegistry(web_fetch_tools(TEST_ONLY))
    ctx = make_ctx(deps, DM, admin=True)
    page = await call(registry, ctx, "web_fetch", url=f"{server}/page")
    assert "> (from a web page (outside: web:127.0.0.1)) # Trip notes" in page.content
    assert ctx.taint.steering("owner") == {"web:127.0.0.1"}
    seen = len(Handler.hosts)
    again = await call(registry, ctx, "web_fetch", url=f"{server}/page?from=the-page")
    assert again.is_error and "steer" in again.content and len(Handler.hosts) == seen  # nothing left
    typed = replace(ctx, typed=f"and now read {server}/page please")
    assert not (await call(registry, typed, "web_fetch", url=f"{server}/page")).is_error
    assert len(Handler.hosts) == seen + 1


async def test_an_approved_fetch_requests_exactly_the_address_shown_once(server: str, deps: ToolDeps) -> None:
    gateway = TerminalGateway(Console(file=io.StringIO()), db=deps.db)
    deps.gateway = gateway
    deps.outbox = Outbox(deps.db, gateway, deps.principals, OutboxSettings(held_dir=deps.workspace.parent / "held"))
    registry = ToolRegistry(web_fetch_tools(TEST_ONLY))
    deps.outbox.attach(registry.tools(), deps)
    ctx = make_ctx(deps, DM, admin=True)
    ctx.taint.saw("forward:Mallory")  # a forwarded message steered this turn
    held = await call(registry, ctx, "web_fetch", url=f"{server}/page?q=4711")
    assert "Held for the owner's approval (#1)" in held.content
    seen = len(Handler.paths)
    code = (await deps.db.fetchone("select digest from pending_sends where id = 1"))["digest"][:8]
    done = await deps.outbox.approve(1, code, by=ctx.sender.id if ctx.sender else None)
    assert done.startswith("Done #1: fetched") and Handler.paths[seen:] == ["/page?q=4711"]
    kept = (deps.workspace / "fetched" / "held-1.md").read_text()
    assert "(outside: web:127.0.0.1)" in kept and "Alps" in kept
    assert "already sent" in await deps.outbox.approve(1, code, by=None) and Handler.paths[seen:] == ["/page?q=4711"]
