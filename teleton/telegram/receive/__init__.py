"""The receive path: a Telegram update becomes archived records, then (once committed) a turn for the agent."""
