"""The agent: its loop (run, turn, round, the request, the tool calls a round makes, the turn's end and its
safety net), and the typed operations a front end submits to it (ops.py)."""
