"""The registry: the tools a session offers, built-ins first, then what tool sources (MCP servers) bring.

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

from typing import Any

from rhapsody.core.toolbox.protocol import Tool, ToolSource


class Registry:
    """The tools by name, in registration order, and the sources that add more between turns."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools = {t.name: t for t in tools}
        self.sources: list[ToolSource] = []
        self._builtin = list(self.tools)

    def specs(self) -> list[dict[str, Any]]:
        """Tool definitions for the request, in registration order."""
        return [
            {"name": t.name, "description": t.description,
             "input_schema": t.schema()}
            for t in self.tools.values()
        ]

    def start_sources(self) -> list[str]:
        """Start every source in the background without waiting (needs a running loop); returns notices."""
        notices: list[str] = []
        for source in self.sources:
            source.start()
            notices += source.notices()
        return notices

    async def close_sources(self) -> None:
        """Stop what the sources started (every MCP server process)."""
        for source in self.sources:
            await source.close()

    async def refresh(self) -> list[str]:
        """Take in the tools of every source (built-ins first, then each source's in its order); returns notices."""
        if not self.sources:
            return []
        tools = {name: self.tools[name] for name in self._builtin}
        notices: list[str] = []
        for source in self.sources:
            source.start()
            for tool in await source.tools():
                tools.setdefault(tool.name, tool)
            notices += source.notices()
        self.tools = tools
        return notices
