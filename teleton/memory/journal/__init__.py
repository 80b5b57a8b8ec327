"""The workspace journal: daily logs that carry the agent across restarts, and the learnings it keeps."""
