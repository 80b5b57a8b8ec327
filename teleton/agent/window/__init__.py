"""The context window: sessions, when and where to compact them (writing first what compaction drops), and
old tool results masked to one line."""
