"""`teleton setup`'s dashboard question: serve the dashboard from the daemon (``web.enabled``), on this machine,
with a login token written into the config (0600). The ``web`` extra is needed; the wizard never runs pip."""

from __future__ import annotations

import secrets
from typing import Any

from teleton.providers import extras

WEB_EXTRA_SIZE = "about 5 MB"  # installed: docs/dependencies.md, Extras


def ask_dashboard(questionary: Any, need: Any, existing_web: dict[str, Any]) -> bool:
    have = extras.missing("web") is None
    needs = "" if have else f" (needs {extras.install_command('web')}, {WEB_EXTRA_SIZE})"
    where = f"http://{existing_web.get('host', '127.0.0.1')}:{existing_web.get('port', 8765)}/"
    question = f"Serve the dashboard on {where} (status, memory, approvals; only you, with a token)?{needs}"
    return bool(need(questionary.confirm(question, default=bool(existing_web.get("enabled", False))).ask()))


def web_settings(web: dict[str, Any], enabled: bool) -> dict[str, Any]:
    """The ``web`` section with the answer written in: on, it gets a token unless it has one."""
    if not enabled:
        return {**web, "enabled": False}
    return {**web, "enabled": True, "token": web.get("token") or secrets.token_urlsafe(32)}


def dashboard_advice(web: dict[str, Any]) -> str | None:
    """Where the dashboard will be and how to log in, or the command that installs what it needs."""
    if not web.get("enabled"):
        return None
    where = f"http://{web.get('host', '127.0.0.1')}:{web.get('port', 8765)}/"
    line = f"the daemon serves it on {where}; log in with web.token from the config file"
    if extras.missing("web") is not None:
        line = f"install the web extra first ({WEB_EXTRA_SIZE}): {extras.install_command('web')}; then {line}"
    return line
