"""Slash commands (DESIGN §11): answered by the runtime itself, no model call. ``/forget`` has its own module."""
