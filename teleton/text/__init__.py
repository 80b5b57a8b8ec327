"""Facts about a text that every layer reads the same way: its size in tokens and its language."""
