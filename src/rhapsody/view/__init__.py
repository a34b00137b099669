"""How records and events are said: the one renderer and what a finished call shows, shared by the front ends,
the commands, MCP results and the memory logs."""
