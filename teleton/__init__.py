"""Teleton: an AI agent that lives on Telegram, with a memory you can trust."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("teleton")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"
