"""The one error media handling raises: its message is the one line the model and the log are shown."""

from __future__ import annotations


class MediaError(Exception):
    """A file that cannot be used (corrupt, unsupported, too large); ``str(exc)`` is a one-line reason."""
