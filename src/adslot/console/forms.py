"""Form posts as the JSON API's bodies: decoded by the very structs and repositories the API uses.

A form's fields are named by the API member they fill (`name`, `caps[1].limit`, `targeting.venue_types`),
so the `field` of an ApiError, the API's own error, names the input to show it next to.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
import msgspec.inspect as mi

from adslot.errors import ApiError, invalid_value
from adslot.fields import MAX_ID

T = TypeVar("T")
Form = Mapping[str, str]


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def decode(body: dict[str, Any], kind: type[T]) -> T:
    """The body as the API would decode it: where the struct asks for a number, the form's text is read
    as the same text in a JSON body would be ("10" is 10, "1e3" a float that an integer field refuses,
    "99999999999999999999" an integer over any bound), then decoded as strictly as the API decodes."""
    try:
        return msgspec.convert(_as_json(body, _type_info(kind)), kind)
    except msgspec.ValidationError as exc:
        raise invalid_value(exc) from exc


_TYPES: dict[type, mi.Type] = {}


def _type_info(kind: type) -> mi.Type:
    found = _TYPES.get(kind)
    if found is None:
        found = _TYPES[kind] = mi.type_info(kind)
    return found


def _as_json(value: Any, kind: mi.Type | None) -> Any:
    """`value` with each text that stands where `kind` wants a number (and no text) read as JSON reads it;
    text that is no JSON number stays text, for the struct to refuse by its field."""
    if isinstance(kind, mi.Metadata):
        kind = kind.type
    options = tuple(t.type if isinstance(t, mi.Metadata) else t for t in getattr(kind, "types", (kind,)))
    if isinstance(value, str):
        number = any(isinstance(t, mi.IntType | mi.FloatType) for t in options)
        if number and not any(isinstance(t, mi.StrType) for t in options) and _JSON_NUMBER.fullmatch(value):
            return msgspec.json.decode(value)
        return value
    if isinstance(value, dict):
        fields = {f.encode_name: f.type for t in options if isinstance(t, mi.StructType) for f in t.fields}
        return {key: _as_json(item, fields.get(key)) for key, item in value.items()}
    if isinstance(value, list):
        items = [t.item_type for t in options if isinstance(t, mi.ListType)]
        return [_as_json(item, items[0] if items else None) for item in value]
    return value


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
    """A number field as typed: decode() reads it as JSON would, and the struct says whether it is one."""
    return text(form, name)


def digits(value: str) -> bool:
    """ASCII digits only: str.isdigit() also takes "²" and "٣", which int() then refuses."""
    return value.isascii() and value.isdigit()


def row_id(value: str, name: str, message: str) -> int:
    """A row's id typed in a form, within the API's bounds (1 to MAX_ID, as its path parameters): a
    larger one names nothing and would overflow the database's integer."""
    if not digits(value) or len(value) > 10 or not 1 <= int(value) <= MAX_ID:
        raise ApiError(400, "invalid_field", message, name)
    return int(value)


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
