"""The Markdown knowledge base: split into chunks, indexed, kept in step with the files as they change."""
