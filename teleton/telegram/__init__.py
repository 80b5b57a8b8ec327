"""Telegram over Telethon: the Gateway implementation and the receive path.

Where a message goes (DESIGN §1), one module per step:

    handlers    Telethon event → records (``convert``), never a network call
    pipeline    archive first (``archiver`` batches commits; ``teleton.memory.feed.archive`` has the SQL);
                a message is offered on, once, only after its row is committed
    dispatch    ``policy`` gate + ``ratelimit`` → one lane per chat (serial), group debounce, unanswered
                group messages kept as ``earlier_context``
    gateway     the agent's actions out: ``markdown`` → ``split`` → send, ``flood`` retries, GatewayError;
                life cycle with ``reconnect`` and catch-up (``history``), login in ``login``

Only this package and ``teleton.cli`` import Telethon.
"""
