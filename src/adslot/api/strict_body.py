"""JSON bodies are read as their schema types them: a string where a number belongs is a 400, not a number.

Litestar converts a decoded body to the handler's type leniently (msgspec `strict=False`, which its query and
path parameters need): `"width": "1920"` would be stored as 1920 and `"cpm": "2.5"` as 2.5, though the OpenAPI
document says integer and number. This guard decodes the body strictly first, so a value of the wrong JSON
type is refused with the path of the field, as any other invalid value is. A body that is not JSON (or not
UTF-8) is `invalid_json`, one nesting too deep `nesting_too_deep` (api/json_body.py), and one not sent as
`Content-Type: application/json` is refused 415 before it is read, as the ad request's is.
"""

from __future__ import annotations

from typing import Any
from weakref import WeakKeyDictionary

import msgspec
from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from adslot.api.ad_request import check_content_encoding, check_content_type
from adslot.api.json_body import decode_json
from adslot.errors import invalid_value

_decoders: WeakKeyDictionary[BaseRouteHandler, msgspec.json.Decoder[Any] | None] = WeakKeyDictionary()
"""Per route handler, as long as its app lives: the strict decoder of its `data` parameter's type."""


def _decoder(handler: BaseRouteHandler) -> msgspec.json.Decoder[Any] | None:
    if handler not in _decoders:
        data = handler.parsed_fn_signature.parameters.get("data")
        _decoders[handler] = None if data is None else msgspec.json.Decoder(data.annotation)
    return _decoders[handler]


async def strict_body(connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
    check_content_encoding(connection.headers.get("content-encoding"))
    decoder = _decoder(handler)
    if decoder is None or not isinstance(connection, Request):
        return
    check_content_type(connection.headers.get("content-type"))
    try:
        decode_json(await connection.body(), decoder)
    except msgspec.ValidationError as exc:
        raise invalid_value(exc) from None
