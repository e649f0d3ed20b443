"""How a msgspec validation failure becomes the error envelope's code and field (API and CLI alike)."""

from __future__ import annotations

import msgspec
import pytest

from adslot.errors import invalid_value


class Cap(msgspec.Struct):
    limit: int


class Body(msgspec.Struct):
    name: str
    caps: list[Cap] = []


def failure(raw: bytes) -> msgspec.ValidationError:
    with pytest.raises(msgspec.ValidationError) as caught:
        msgspec.json.decode(raw, type=Body)
    return caught.value


def test_a_nested_field_is_named_by_its_path_without_the_root_sign() -> None:
    error = invalid_value(failure(b'{"name": "x", "caps": [{"limit": 1}, {"limit": "2"}]}'))
    assert (error.status, error.code, error.field) == (400, "invalid_field", "caps[1].limit")
    assert error.message == "Expected `int`, got `str`"


def test_a_wrong_type_at_the_root_is_an_invalid_body_without_a_field() -> None:
    error = invalid_value(failure(b'["x"]'))
    assert (error.status, error.code, error.field) == (400, "invalid_body", None)


def test_an_api_error_crosses_a_process_boundary_whole() -> None:
    import pickle

    from adslot.errors import ApiError

    error = pickle.loads(pickle.dumps(ApiError(422, "unknown_venue", "no venue", "venue_id")))
    assert (error.status, error.code, error.message, error.field) == (
        422,
        "unknown_venue",
        "no venue",
        "venue_id",
    )
