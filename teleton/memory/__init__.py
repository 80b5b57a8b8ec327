"""Memory: what the agent remembers and how it is found again (docs/memory.md).

Storage-level records and search, no model SDK and no Telegram (import-linter keeps it so). Its sub-packages
(search, embeddings, feed, knowledge, facts, forget, journal) and modules are mapped in docs/architecture.md,
"Packages".
"""
