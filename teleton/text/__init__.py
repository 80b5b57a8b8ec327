"""Facts about a text that every layer reads the same way: its size in tokens, its language, and the text on
one line (``lines``)."""
