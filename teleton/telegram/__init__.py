"""Telegram over Telethon: the Gateway implementation, the receive path (``receive/``), the send path (``send/``).

Where a message goes, module by module: docs/architecture.md, "One message, from the update to the reply".
Only this package, ``teleton.daemon`` and ``teleton.cli`` import Telethon.
"""
