"""A Messages request body as the bytes the SDK would send, each unchanged message serialised once.

Given a body as parameters, the SDK copies every container in it before serialising it (so
that a retry resends what was asked even if the caller changed it meanwhile); over a long
history that copy costs more than everything else on this side of the socket. A body comes
from the history view, whose messages are frozen and reused from one request to the next
(`Message.api` is computed once), so each message dict is serialised once: the bytes of the
last body's messages are kept, keyed by the identity of the dict they were made from (the
dict is held with them, so its identity cannot pass to another object), and the next body
joins them with the few that are new. A seam, a rewind or a thinking cut builds new message
dicts, so what they change is serialised afresh.

The bytes are the SDK's own form (compact separators, UTF-8, no NaN, the fields in the order
`messages.create` sends them). A body the form cannot hold, or holding a field this was not
told of, gives None: the caller then hands the parameters to the SDK as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class PreparedBodies:
    """Serialises request bodies, reusing the bytes of messages the previous body already held."""

    def __init__(self, fields: Iterable[str]) -> None:
        self.fields = tuple(fields)
        """The body fields, in the order the SDK serialises them."""
        self._known = frozenset(self.fields)
        self._kept: dict[int, tuple[object, bytes]] = {}
        self.serialised = 0
        """How many messages the last body serialised afresh (the others were the previous body's)."""

    def encode(self, body: Mapping[str, Any]) -> bytes | None:
        """The JSON bytes of `body`, or None when only the SDK can prepare it."""
        if not self._known.issuperset(body) or not isinstance(body.get("messages"), list):
            return None
        try:
            parts = [_dump(key) + b":" + (self._messages(body[key]) if key == "messages" else _dump(body[key]))
                     for key in self.fields if key in body]
        except (TypeError, ValueError, RecursionError):  # what the SDK's own encoder would raise, as it would
            return None
        return b"{" + b",".join(parts) + b"}"

    def _messages(self, messages: list[Any]) -> bytes:
        kept: dict[int, tuple[object, bytes]] = {}
        pieces = []
        fresh = 0
        for message in messages:
            entry = self._kept.get(id(message))
            if entry is None or entry[0] is not message:
                entry = (message, _dump(message))
                fresh += 1
            kept[id(message)] = entry
            pieces.append(entry[1])
        self._kept, self.serialised = kept, fresh  # only the bytes this body used stay
        return b"[" + b",".join(pieces) + b"]"


def _dump(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()
