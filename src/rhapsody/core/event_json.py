"""The one serialiser of events: what the headless JSON lines print and the Python API's `as_json` gives.

An event becomes `{"event": its json_name, field: value, …}`; a message or block becomes its API form
and a typed record its history form, so the output is plain JSON whatever the fields hold.

Imports: stdlib, pydantic and rhapsody.core only.
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

from pydantic import BaseModel

from rhapsody.core.events import Event
from rhapsody.core.session import records as rec

EVENT_TYPES: tuple[type[Event], ...] = get_args(Event)
"""Every event class, in the order the `Event` union lists them."""


def json_name(event: Event | type[Event]) -> str:
    """The event's public name: the `event` field of its JSON line."""
    return event.json_name


def as_json(event: Event) -> dict[str, Any]:
    """The event as a JSON-ready dict, its public name first."""
    data: dict[str, Any] = {"event": json_name(event)}
    for field in dataclasses.fields(event):
        data[field.name] = _plain(getattr(event, field.name))
    return data


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it: messages and blocks by their API form, a typed record as its history
    line holds it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a sub-agent's own event, whole
        return as_json(value)  # type: ignore[arg-type]  # every dataclass a field holds is an event
    if hasattr(value, "dump"):
        return value.dump()
    if hasattr(value, "to_api"):
        return value.to_api()
    if isinstance(value, BaseModel) and isinstance(value, (*rec.MODELS.values(), rec.Other)):
        return rec.dump(value)  # a record as its history line holds it
    if isinstance(value, BaseModel):  # only the fields it was given
        return value.model_dump(mode="json", exclude_unset=True)
    return value
