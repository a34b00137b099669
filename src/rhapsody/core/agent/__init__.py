"""The agent: its loop, and the typed operations a front end submits to it (ops.py)."""
