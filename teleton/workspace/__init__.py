"""The agent's workspace folder: its prompt files, MEMORY.md, memory/ notes and daily logs."""
