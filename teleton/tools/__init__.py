"""The tools the model may call, one module per family, all behind the registry's one door.

| module | what |
|---|---|
| registry | Tool, ToolRegistry, scopes, ToolContext with the turn's clearance and taint (the core) |
| outbox, held, held_notice | every way out: the egress check, held items and the owner's approval |
| suite | build_registry(config): every family the config enables |
| config_store | tool_config overrides and the /tools, /tool admin commands |
| rag | ToolIndex: which tools to offer for one message |
| families/telegram_actions | send, reply, edit, delete, forward, pin, react, poll, file, download; all Telegram tools |
| families/telegram_reads | history, search, chat/user info, dialogs, participants, moderation |
| families/telegram_common | the chat rules every Telegram tool obeys, refusals as error results |
| families/memory | memory_read/write/save/recall/search |
| families/documents | memory_add_document |
| families/forget | memory_forget |
| families/workspace | workspace_list/read/write/delete/rename (rules in families/workspace_paths) |
| families/web_fetch | web_fetch with SSRF checks |
| families/exec, exec_sweep | exec (only when capabilities.exec.enabled) and what it leaves behind |
| families/tasks | schedule_task, list_tasks, cancel_task (run by teleton.scheduler) |
"""
