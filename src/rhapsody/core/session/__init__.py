"""The session: its history file, the typed records, the context built from them, the strip and the handoff, recall."""
