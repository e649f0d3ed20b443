"""Domain errors carry a stable machine-readable code, the HTTP status and the offending field.

Domain code raises these; the HTTP layers render them as
`{"status": <int>, "error": {"code": ..., "message": ..., "field": ...}}`.
"""

from __future__ import annotations

import msgspec


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    def __reduce__(self) -> tuple[type[ApiError], tuple[int, str, str, str | None]]:
        """Whole across a process boundary (a forecast runs in a child process)."""
        return (type(self), (self.status, self.code, self.message, self.field))

    def body(self) -> bytes:
        return msgspec.json.encode(
            {
                "status": self.status,
                "error": {"code": self.code, "message": self.message, "field": self.field},
            }
        )


INTERNAL_ERROR = ApiError(500, "internal_error", "an internal error occurred; it has been logged")
"""The answer to a bug, from the fast lane and from Litestar alike; the traceback goes to the log."""


STORAGE_UNAVAILABLE = ApiError(
    503, "storage_unavailable", "the database cannot take this request right now; retry shortly"
)
"""The answer when the database or the ledger's writer cannot serve now (storage/failures.py): with a
Retry-After, since a retry is safe and will likely succeed."""


def invalid_value(exc: msgspec.ValidationError) -> ApiError:
    """msgspec's "Expected `int`, got `str` - at `$.caps[0].limit`" as invalid_field on `caps[0].limit`; a
    body of the wrong type as a whole (no path) is invalid_body. The API and the CLI both answer with it."""
    message, _, where = str(exc).partition(" - at `$")
    field = where.rstrip("`").lstrip(".") or None
    return ApiError(400, "invalid_field" if field else "invalid_body", message, field)
