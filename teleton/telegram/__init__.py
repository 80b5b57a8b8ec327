"""Telegram over Telethon: the Gateway implementation, the receive path and the send path.

Where a message goes (docs/architecture.md; docs/architecture.md):

    receive/handlers    Telethon event → records (``receive/convert``), never a network call
    receive/pipeline    archive first (``receive/archiver`` batches commits; ``teleton.memory.feed.archive`` has
                        the SQL); a message is offered on, once, only after its row is committed
    receive/dispatch    ``receive/policy`` gate + ``receive/ratelimit`` → one lane per chat (serial), group
                        debounce, unanswered group messages kept as ``earlier_context``
    receive/recovery    after a restart: every message left open answered once or failed with a reason
    send/actions        the agent's actions out: ``send/markdown`` → ``send/split`` → ``send/sending`` (one
                        ``random_id`` per part), ``flood`` retries, GatewayError
    gateway             life cycle: login (``login``), reconnect, catch-up (``receive/history``), ``faults``

Only this package, ``teleton.daemon`` and ``teleton.cli`` import Telethon.
"""
