"""MCP servers as tools."""
