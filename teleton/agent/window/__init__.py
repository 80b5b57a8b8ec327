"""The context window: when and where to compact a session, and old tool results masked to one line."""
