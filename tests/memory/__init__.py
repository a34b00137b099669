"""Project memory."""
