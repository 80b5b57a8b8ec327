"""Memory: what the agent remembers and how it is found again. Storage-level records and search, no model SDK and no
Telegram (import-linter keeps it so).

- ``search/``: the one hybrid search (FTS5 keywords + vectors, fused), its query parsing and its indexes.
- ``embeddings/``: the embedding providers (local ONNX by default) and their cache.
- ``reembed.py``: rows of every kind without a vector embedded (after a model change, or an outage).
- ``feed/``: the Telegram archive: every tg_* row is written and read here, and the delivery states of a message.
- ``knowledge/``: the Markdown knowledge base, chunked and indexed; the only writer of knowledge rows.
- ``facts/``: structured facts, who they are about, their merging and recall.
- ``forget/``: finding and erasing every copy of a text.
- ``journal/``: daily logs and learnings in the workspace.
- ``portable.py``: memory as one JSON document (export and import).
"""
