"""The dashboard's login cannot be brute-forced (issue 53, point 7): wrong tokens slowed per client with a
growing wait, during which nothing is checked (the real app served by uvicorn on 127.0.0.1, its throttle on
a clock the test moves); and a token a guesser could find refused for a dashboard other machines can reach
(the config's rule, `teleton dashboard --host`, the token the setup and the token file make)."""

from __future__ import annotations

import asyncio
import os
import secrets
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from teleton.cli.setup_dashboard import web_settings
from teleton.config import ConfigError, load_config
from teleton.config.schema import WebConfig
from teleton.daemon.dashboard import dashboard_token, start_dashboard
from teleton.web.app import Dashboard, build_app
from teleton.web.security import BindRefused, Guard, check_bind
from teleton.web.server import WebServer, listen
from teleton.web.throttle import LoginThrottle, client_key
from tests.web.test_dashboard_security import SAME_ORIGIN, TOKEN, config_file

WEAK = "hunter22"  # digits and lowercase, 8 long: about 41 bits


class Clock:
    """Seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Served:
    url: str
    clock: Clock
    dash: Dashboard

    def client(self, local_address: str | None = None) -> httpx.AsyncClient:
        """A browser at ``local_address`` (another loopback address: another machine, as the server sees it)."""
        transport = httpx.AsyncHTTPTransport(local_address=local_address) if local_address else None
        return httpx.AsyncClient(base_url=self.url, transport=transport, timeout=30, headers=SAME_ORIGIN)


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """The real app as the daemon builds it, with the login throttle on the test's clock."""
    clock = Clock()

    async def status() -> dict[str, Any]:
        return {"condition": "running"}

    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    dash = Dashboard(Guard.build(TOKEN, "127.0.0.1", port), status, throttle=LoginThrottle(clock))
    server = WebServer(build_app(dash), sock)
    server.start()
    try:
        yield Served(f"http://127.0.0.1:{port}", clock, dash)
    finally:
        await server.stop()


async def login(http: httpx.AsyncClient, token: str, **headers: str) -> httpx.Response:
    return await http.post("/login", data={"token": token}, headers=headers)


def throttled(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "dashboard_login_throttled"]


async def test_a_flood_of_wrong_logins_waits_unchecked_and_the_right_token_waits_too(
    served: Served, logs: list[dict[str, Any]]
) -> None:
    guesses = [f"guess-{n}" for n in range(12)]
    async with served.client() as http:
        answers = [await login(http, guess) for guess in guesses]
        assert [a.status_code for a in answers] == [403] * 6 + [429] * 6  # five free, the sixth starts the wait
        assert {a.headers["retry-after"] for a in answers[6:]} == {"1"} and "try again in 1 s" in answers[6].text
        # Within the wait even the right token is not checked: a guess there could tell nothing.
        assert (await login(http, TOKEN)).status_code == 429
        served.clock.now += 1
        assert (await login(http, "guess-again")).status_code == 403  # checked, wrong: the wait doubles
        assert (await login(http, TOKEN)).headers["retry-after"] == "2"
        served.clock.now += 2
        right = await login(http, TOKEN)
        assert right.status_code == 303 and (await http.get("/status")).status_code == 200
        # The good login cleared the client: five free ones again, and a new burst starts at the sixth.
        assert [(await login(http, "typo")).status_code for _ in range(6)] == [403] * 6
    lines = throttled(logs)
    assert [(e["client"], e["failures"], e["log_level"]) for e in lines] == [("127.0.0.1", 6, "warning")] * 2
    assert not any(guess in repr(logs) for guess in [*guesses, TOKEN, "typo"])  # never a tried token


async def test_parallel_guesses_are_counted_one_by_one(served: Served) -> None:
    """Forty wrong tokens sent at once: each is counted before the next is looked at, so only the free ones
    and the one that starts the wait are checked."""
    async with served.client() as http:
        answers = await asyncio.gather(*(login(http, f"guess-{n}") for n in range(40)))
    codes = [a.status_code for a in answers]
    assert codes.count(403) == 6 and codes.count(429) == 34


async def test_another_client_logs_in_while_one_is_throttled(served: Served) -> None:
    async with served.client() as mallory, served.client("127.0.0.2") as owner:
        for _ in range(6):
            await login(mallory, "guess")
        assert (await login(mallory, TOKEN)).status_code == 429
        assert (await login(owner, TOKEN)).status_code == 303


async def test_behind_a_proxy_on_this_machine_each_forwarded_client_counts_alone(served: Served) -> None:
    """uvicorn believes X-Forwarded-For from loopback only: through the local proxy (127.0.0.1) each forwarded
    address is its own client; a client elsewhere (127.0.0.2) naming another address is still itself."""
    async with served.client() as proxy, served.client("127.0.0.2") as elsewhere:
        for _ in range(6):
            await login(proxy, "guess", **{"x-forwarded-for": "203.0.113.7"})
        assert (await login(proxy, TOKEN, **{"x-forwarded-for": "203.0.113.7"})).status_code == 429
        assert (await login(proxy, TOKEN, **{"x-forwarded-for": "203.0.113.8"})).status_code == 303
        for n in range(6):
            await login(elsewhere, "guess", **{"x-forwarded-for": f"198.51.100.{n}"})
        assert (await login(elsewhere, TOKEN, **{"x-forwarded-for": "198.51.100.99"})).status_code == 429
    assert len(served.dash.throttle) == 2  # 203.0.113.7 and 127.0.0.2; the good login left nothing behind


def test_the_wait_doubles_to_five_minutes_and_an_hour_of_quiet_forgets() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock)
    waits = []
    for _ in range(16):
        clock.now += throttle.retry_after("a")  # the guesser waits exactly as long as it is told
        waits.append(throttle.failed("a").wait_s)
    assert waits == [0.0] * 5 + [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 300.0, 300.0]
    assert throttle.retry_after("a") == 300
    clock.now += 3_600
    assert throttle.retry_after("a") == 0 and throttle.failed("a") == (1, 0.0, False)
    for _ in range(5_000):  # days at the cap: the wait stays 5 minutes
        clock.now += 300
        throttle.failed("a")
    assert throttle.retry_after("a") == 300


def test_the_state_stays_bounded_under_a_flood_of_addresses() -> None:
    clock = Clock()
    throttle = LoginThrottle(clock, max_clients=1_000)
    for _ in range(6):
        throttle.failed("192.0.2.1")
    for n in range(20_000):
        throttle.failed(f"10.{n // 65536}.{n // 256 % 256}.{n % 256}")
        assert len(throttle) <= 1_000
    # The least recently seen went first (the price of a bound: a client silent through 1,000 others starts
    # again); a throttled client that keeps trying stays among the most recent, and throttled.
    assert len(throttle) == 1_000 and throttle.retry_after("192.0.2.1") == 0
    throttle.failed("198.51.100.1")
    for _ in range(5):
        throttle.failed("198.51.100.1")
    for n in range(999):
        throttle.failed(f"172.16.{n // 256}.{n % 256}")
        assert throttle.retry_after("198.51.100.1") == 1
    assert len(throttle) == 1_000


def test_a_client_is_its_address_an_ipv6_one_its_64() -> None:
    assert client_key("203.0.113.5") == "203.0.113.5"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert client_key("::ffff:203.0.113.5") == "203.0.113.5"
    assert client_key(None) == "unknown"


# The token rule: 128 bits or more beyond this machine.

TOO_WEAK = (
    "web.token is too weak for host 0.0.0.0, which other machines can reach (about 4 bits, 128 needed): make one "
    "with python3 -c 'import secrets; print(secrets.token_urlsafe(32))', or listen on 127.0.0.1"
)


def test_a_guessable_token_is_refused_beyond_this_machine(tmp_path: Path) -> None:
    with pytest.raises(ValidationError) as refused:
        WebConfig(enabled=True, host="0.0.0.0", token="a")
    assert [e["ctx"]["error"].args[0] for e in refused.value.errors()] == [TOO_WEAK]
    with pytest.raises(ConfigError) as config_error:
        load_config(config_file(tmp_path, enabled=True, host="0.0.0.0", token="a"), env={})
    assert str(config_error.value) == f"config.yaml: web: {TOO_WEAK}"  # the section's input (its token) not shown
    with pytest.raises(BindRefused) as bind:
        check_bind("0.0.0.0", "a")
    assert str(bind.value) == TOO_WEAK
    # The estimate: length x log2 of the alphabets used; 27 lowercase letters are 126 bits, 28 are 131.
    with pytest.raises(ValidationError, match=r"about 126 bits"):
        WebConfig(enabled=True, host="192.0.2.10", token="x" * 27)
    assert WebConfig(enabled=True, host="192.0.2.10", token="x" * 28).token == "x" * 28
    for host in ("127.0.0.1", "::1", "localhost"):  # on this machine alone any token will do
        assert WebConfig(enabled=True, host=host, token="a").token == "a"
        check_bind(host, "a")


def test_the_tokens_teleton_makes_are_strong(tmp_path: Path) -> None:
    made = [
        web_settings({"host": "0.0.0.0"}, enabled=True)["token"],  # `teleton setup --dashboard`
        dashboard_token(load_config(config_file(tmp_path, token=None), env={}))[0],  # the token file
        secrets.token_urlsafe(32),  # what the refusal says to run
        secrets.token_hex(16),
    ]
    for token in made:
        check_bind("0.0.0.0", token)
        assert WebConfig(enabled=True, host="0.0.0.0", token=token).token == token


async def test_a_short_token_still_serves_on_this_machine(tmp_path: Path) -> None:
    config = load_config(config_file(tmp_path, token="a"), env={})
    server = await start_dashboard(config, lambda: None)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", headers=SAME_ORIGIN) as http:
            assert (await login(http, "a")).status_code == 303
    finally:
        await server.stop()


def test_teleton_dashboard_beyond_this_machine_refuses_a_weak_token_in_one_line(tmp_path: Path) -> None:
    path = config_file(tmp_path, token=WEAK)
    proc = subprocess.run(
        [sys.executable, "-m", "teleton.cli.main", "-c", str(path), "dashboard", "--host", "0.0.0.0"],
        capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stdout == "", proc.stderr
    assert proc.stderr.startswith("error: the dashboard cannot listen on 0.0.0.0:0: web.token is too weak")
    assert "about 41 bits, 128 needed" in proc.stderr and "secrets.token_urlsafe(32)" in proc.stderr
    assert WEAK not in proc.stderr
