"""The one place a request's JSON body is decoded: whatever the bytes, a defined 400, never a 500.

msgspec decodes nested arrays and objects recursively under Python's recursion limit, so a body nesting them
a thousand deep (2 KB, in a field the schema ignores or not) raises RecursionError: it is answered 400
`nesting_too_deep`. Nothing legitimate nests more than a few levels, and catching costs nothing until it
happens, so the hot paths pay no depth scan.
"""

from __future__ import annotations

from typing import Any

import msgspec

from adslot.errors import ApiError

TOO_DEEP = "nesting_too_deep"


def decode_json(raw: bytes, decoder: msgspec.json.Decoder[Any] | None = None) -> Any:
    """`raw` decoded (typed by `decoder`, or as plain JSON); a typed decoder's msgspec.ValidationError passes
    through for the caller to name its field. Plain JSON fails validation only where the text itself is out
    of what JSON decodes to (a number past a float's range): that is invalid JSON."""
    try:
        return msgspec.json.decode(raw) if decoder is None else decoder.decode(raw)
    except msgspec.ValidationError as exc:
        if decoder is not None:
            raise
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {exc}", "body") from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # msgspec raises the latter on invalid UTF-8
        raise ApiError(400, "invalid_json", f"the body is not valid JSON: {exc}", "body") from None
    except RecursionError:
        raise ApiError(
            400, TOO_DEEP, "the body nests arrays or objects deeper than adslot reads", "body"
        ) from None
