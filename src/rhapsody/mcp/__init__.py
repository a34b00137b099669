"""MCP servers as tools, through the official `mcp` SDK: which servers start, the client, their results."""
