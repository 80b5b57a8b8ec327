"""From config.yaml to a working gateway: every telegram.* value reaches the part that uses it."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml

from teleton.config import load_config
from teleton.storage import Database
from teleton.telegram.gateway import TelegramGateway, session_file


async def test_gateway_from_config(tmp_path: Path, db: Database) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "storage": {"data_dir": str(tmp_path / "data")},
                "telegram": {
                    "api_id": 123,
                    "api_hash": "f" * 32,
                    "phone": "+15550000",
                    "owner_id": 1,
                    "admin_ids": [2],
                    "dm_policy": "open",
                    "group_policy": "admin-only",
                    "allow_from": ["@Carol", 5],
                    "group_allow_from": [-100123],
                    "require_mention": False,
                    "rate_limit_per_chat": 7,
                    "rate_limit_global": 70,
                    "debounce_ms": 900,
                    "debounce_max_factor": 2,
                    "debounce_max_messages": 9,
                    "flood_wait_max_s": 30,
                    "reconnect_max_delay_s": 45,
                    "typing_indicator": False,
                },
            }
        )
    )
    config = load_config(path)
    gateway = TelegramGateway.from_config(config, db)
    s = gateway.settings
    assert (s.policy.dm_policy, s.policy.group_policy, s.policy.require_mention) == ("open", "admin-only", False)
    assert s.policy.admin_ids == {1, 2}  # the owner is an admin
    assert (s.policy.allow_usernames, s.policy.allow_user_ids, s.policy.group_allow_from) == ({"carol"}, {5}, {-100123})
    assert (s.rate_limit_per_chat, s.rate_limit_global, s.flood_wait_max_s, s.reconnect_max_delay_s) == (7, 70, 30, 45)
    assert (s.debounce.window_s, s.debounce.max_factor, s.debounce.max_messages) == (0.9, 2, 9)
    assert gateway.client.flood_sleep_threshold == 0  # every FloodWait comes to us, bounded
    dispatcher = gateway.on_message(lambda msg: None)  # type: ignore[arg-type, return-value]
    assert dispatcher.typing is None and dispatcher.gate.limiter.per_chat == 7
    session = session_file(config.telegram.session_path)
    assert session == tmp_path / "data" / "telegram.session"
    assert stat.S_IMODE(session.stat().st_mode) == 0o600
    assert stat.S_IMODE(session.parent.stat().st_mode) == 0o700
    await gateway.stop(grace_s=0.1)
