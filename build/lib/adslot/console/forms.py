"""Form posts as the JSON API's bodies: decoded by the very structs and repositories the API uses.

A form's fields are named by the API member they fill (`name`, `caps[1].limit`, `targeting.venue_types`),
so the `field` of an ApiError, the API's own error, names the input to show it next to.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

from adslot.errors import ApiError, invalid_value

T = TypeVar("T")
Form = Mapping[str, str]


def decode(body: dict[str, Any], kind: type[T]) -> T:
    """The body as the API would decode it; the form's strings are taken for numbers where a number is
    asked for ("10" for 10), nothing more lenient."""
    try:
        return msgspec.convert(body, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise invalid_value(exc) from exc


def text(form: Form, name: str) -> str | None:
    """A field's trimmed text; None when blank (the API's "not given")."""
    value = form.get(name, "").strip()
    return value or None


def words(form: Form, name: str) -> list[str] | None:
    """A list typed as text, one item per comma or line; None when blank."""
    raw = form.get(name, "").replace("\n", ",")
    items = [item.strip() for item in raw.split(",") if item.strip()]
    return items or None


def number(form: Form, name: str) -> str | None:
    """A number field as typed: the struct's decoding says whether it is one, and names the field if not."""
    return text(form, name)


def utc_time(form: Form, name: str) -> int | None:
    """A datetime-local input (`2026-12-04T10:00`, read as UTC) as epoch seconds."""
    value = text(form, name)
    if value is None:
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError as exc:
        raise ApiError(400, "invalid_field", "a date and time such as 2026-12-04T10:00", name) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp())


def utc_input(epoch: int | None) -> str:
    """Epoch seconds as a datetime-local input's value, in UTC."""
    if epoch is None:
        return ""
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M")


def error_for(error: ApiError | None, name: str) -> str | None:
    """The error's message when it is about the input `name` or a part of it (`caps[1]` is about
    `caps[1].limit`'s row, `targeting.venue_types[2]` about `targeting.venue_types`)."""
    if error is None or error.field is None:
        return None
    field = error.field
    if field == name or field.startswith((name + "[", name + ".")) or name.startswith(field + "."):
        return error.message
    return None


def drop_none(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in body.items() if v is not None}
