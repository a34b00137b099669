"""The model providers against the loopback server."""
