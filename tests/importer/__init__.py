"""Importing Claude Code and Codex sessions."""
