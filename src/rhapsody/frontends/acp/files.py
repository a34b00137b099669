"""The client's filesystem (`fs/read_text_file`, `fs/write_text_file`), for the file tools, where it offers it.

An editor's copy of a file holds what the human has not saved yet, and a write through it lands in the
buffer the human sees. The tools confine and check each path on disk before asking (tools/files.py).
"""

from __future__ import annotations

from pathlib import Path

from acp.interfaces import Client
from acp.schema import ClientCapabilities


class ClientFiles:
    """`EditorFiles` over the protocol, for one session."""

    def __init__(self, client: Client, session_id: str) -> None:
        self.client = client
        self.session_id = session_id

    async def read(self, path: Path) -> str:
        """The client's text of `path`."""
        return (await self.client.read_text_file(session_id=self.session_id, path=str(path))).content

    async def write(self, path: Path, content: str) -> None:
        """Write `path` through the client."""
        await self.client.write_text_file(session_id=self.session_id, path=str(path), content=content)


def offered(capabilities: ClientCapabilities) -> bool:
    """Whether the client reads and writes text files for the agent (both, or rhapsody uses the disk)."""
    fs = capabilities.fs
    return fs is not None and bool(fs.read_text_file) and bool(fs.write_text_file)
