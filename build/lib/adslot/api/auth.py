"""Ssp-Key authentication and permission checks.

Nearly every request is answered from the worker's in-memory key table, a dict lookup and no await:
`known_key`. A key that table lacks may have been created since it was loaded, so `authenticate` looks it up
in the database (Environment.find_key, batched and bounded: auth/lookup.py) before refusing it; a new key
works on every worker from its first request. The ad request, on the hot lane, writes `known_key(...) or await
authenticate(...)`, so its common case creates no coroutine; the framework's handlers await authenticate.
"""

from __future__ import annotations

from adslot.auth.keys import LIVE_PREFIX, TEST_PREFIX, KeyRecord, hash_key
from adslot.environment import Environment
from adslot.errors import ApiError

HEADER = "ssp-key"


def known_key(env: Environment, key: str | None, scope: str) -> KeyRecord | None:
    """The key's record if the worker's key table holds it, checked for `scope`; None if the table lacks it
    (then `authenticate` decides). A missing key, and one without `scope`, raise their ApiError."""
    if key is None or not key.strip():
        raise ApiError(401, "missing_api_key", "send your account key in the Ssp-Key header", "Ssp-Key")
    catalog = env.catalog
    assert catalog is not None, "environment not started"
    record = catalog.keys.get(hash_key(key.strip()))
    return None if record is None else _permitted(record, scope)


async def authenticate(env: Environment, key: str | None, scope: str) -> KeyRecord:
    """The key's record, from the key table or else the database; an ApiError if it is missing, belongs to the
    other environment, is unknown or revoked, or lacks `scope`."""
    record = known_key(env, key, scope)
    if record is not None:
        return record
    assert key is not None  # known_key refused it otherwise
    other = TEST_PREFIX if env.name == "production" else LIVE_PREFIX
    if key.startswith(other):
        kind, where = ("a sandbox", "sandbox") if env.name == "production" else ("a production", "production")
        raise ApiError(
            401,
            "wrong_environment",
            f"this is {kind} key; send it to the {where} base URL "
            f"{env.settings.environment(where).public_url}",
            "Ssp-Key",
        )
    record = await env.find_key(hash_key(key.strip()))
    if record is None:
        raise ApiError(401, "invalid_api_key", "the key is unknown or revoked", "Ssp-Key")
    return _permitted(record, scope)


def _permitted(record: KeyRecord, scope: str) -> KeyRecord:
    if scope not in record.scopes:
        raise ApiError(403, "insufficient_scope", f"this key lacks the {scope!r} permission", "Ssp-Key")
    return record
