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

    def body(self) -> bytes:
        return msgspec.json.encode(
            {
                "status": self.status,
                "error": {"code": self.code, "message": self.message, "field": self.field},
            }
        )


INTERNAL_ERROR = ApiError(500, "internal_error", "an internal error occurred; it has been logged")
"""The answer to a bug, from the fast lane and from Litestar alike; the traceback goes to the log."""
