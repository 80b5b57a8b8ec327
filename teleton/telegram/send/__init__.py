"""The send path: the model's Markdown to Telegram messages, each part sent at most once, FloodWait honoured."""
