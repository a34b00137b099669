"""Errors rhapsody raises on purpose, each meant to reach the user as one line.

    RhapsodyError
    ├── ConfigError        a settings file or variable is malformed
    ├── HistoryError       a history file cannot be read or was written by a newer version
    ├── InputError         a file given on the command line is malformed
    ├── StorageError       rhapsody's own files cannot be written (no room, no permission)
    └── ModelError         the model provider failed for good (retries exhausted, 4xx)
        └── ContextTooLong the request is longer than the model's context window

Imports: stdlib only.
"""

from __future__ import annotations


class RhapsodyError(Exception):
    """Base of every error meant for the user; str() is the one-line message."""


class ConfigError(RhapsodyError):
    """A settings file or environment variable is malformed."""


class HistoryError(RhapsodyError):
    """A history file cannot be read, or was written by a newer rhapsody."""


class InputError(RhapsodyError):
    """A file given on the command line is malformed."""


class StorageError(RhapsodyError):
    """A folder or file rhapsody keeps its own state in cannot be created or written."""


class ModelError(RhapsodyError):
    """The model provider failed and retrying will not help."""


class ContextTooLong(ModelError):
    """The request does not fit the model's context window: the API refused it for length
    (Anthropic's 400 "prompt is too long", an OpenAI-compatible `context_length_exceeded`), or
    rhapsody's own estimate says it would be. The loop strips first and goes on (core/window.py)."""
