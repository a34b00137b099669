"""Other agents' sessions as rhapsody histories: one parser per source format (claude_code, codex) into
the shapes of transcript.py, and to_history.py, which writes them as the record kinds rhapsody writes itself."""
