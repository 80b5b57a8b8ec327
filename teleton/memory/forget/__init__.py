"""Forget everywhere: find every copy of a text in the archive, the facts, the knowledge files, then erase it."""
