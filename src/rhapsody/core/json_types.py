"""The type of decoded JSON, named once.

What the Messages API's request bodies and content blocks, a provider's wire chunks, an MCP or
hook program's JSON messages, a settings file, a foreign history line or rhapsody's own `--json`
output are before (or instead of) a model that reads them: a JSON object whose values are any
JSON. Typed records (core/session/records.py) and blocks (core/session/messages.py) take over
wherever rhapsody itself reads the fields.

Imports: stdlib only.
"""

from typing import Any

JsonObject = dict[str, Any]
"""A decoded JSON object (`json.loads` of an object, or one about to be `json.dumps`ed)."""
