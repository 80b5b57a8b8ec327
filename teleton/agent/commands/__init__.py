"""Slash commands (docs/operations.md): answered by the runtime itself, no model call. ``/forget`` has its own
module."""
