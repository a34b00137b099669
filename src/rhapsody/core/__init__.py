"""The core: the loop, the session and its history, the handoff. Imports only the stdlib, pydantic and rhapsody.core."""
