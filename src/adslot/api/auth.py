"""Ssp-Key authentication and permission checks, answered from the in-memory key table."""

from __future__ import annotations

from adslot.auth.keys import LIVE_PREFIX, TEST_PREFIX, KeyRecord, hash_key
from adslot.environment import Environment
from adslot.errors import ApiError

HEADER = "ssp-key"


def authenticate(env: Environment, key: str | None, scope: str) -> KeyRecord:
    if key is None or not key.strip():
        raise ApiError(401, "missing_api_key", "send your account key in the Ssp-Key header", "Ssp-Key")
    catalog = env.catalog
    assert catalog is not None, "environment not started"
    record = catalog.keys.get(hash_key(key.strip()))
    if record is None:
        other = TEST_PREFIX if env.name == "production" else LIVE_PREFIX
        if key.startswith(other):
            kind, where = (
                ("a sandbox", "sandbox") if env.name == "production" else ("a production", "production")
            )
            raise ApiError(
                401,
                "wrong_environment",
                f"this is {kind} key; send it to the {where} base URL "
                f"{env.settings.environment(where).public_url}",
                "Ssp-Key",
            )
        raise ApiError(401, "invalid_api_key", "the key is unknown or revoked", "Ssp-Key")
    if scope not in record.scopes:
        raise ApiError(403, "insufficient_scope", f"this key lacks the {scope!r} permission", "Ssp-Key")
    return record
