"""The tools the model may call, one module per family, all behind the registry's one door.

| module | tools |
|---|---|
| registry | Tool, ToolRegistry, scopes, ToolContext with the turn's clearance and taint (the core) |
| outbox | sends to other chats: the egress check, held sends and their approval |
| telegram_tools | send/reply/edit/delete/forward/pin/react/poll/file/download (+ the list of all Telegram tools) |
| telegram_reads | history, search, chat/user info, dialogs, participants, moderation |
| telegram_common | the chat rules every Telegram tool obeys, refusals as error results |
| memory_tools | memory_read/write/save/recall/search |
| workspace_tools | workspace_list/read/write/delete/rename (rules in workspace_paths) |
| web_fetch | web_fetch with SSRF checks |
| exec_tool | exec (only when capabilities.exec.enabled) |
| task_tools | schedule_task, list_tasks, cancel_task (run by teleton.scheduler) |
| suite | build_registry(config): every family the config enables |
| tool_config_store | tool_config overrides and the /tools, /tool admin commands |
| tool_rag | ToolIndex: which tools to offer for one message |
"""
