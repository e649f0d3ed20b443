"""Accounts and keys in the environment's database (management rate, synchronous SQLAlchemy)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from adslot.auth.keys import KeyRecord, display_prefix, hash_key, new_key, parse_scopes
from adslot.storage.tables import accounts, api_keys, player_keys


@dataclass(frozen=True)
class KeyInfo:
    id: int
    account: str
    prefix: str
    scopes: list[str]
    label: str | None
    created_at: int
    revoked_at: int | None


def ensure_account(conn: sa.Connection, name: str) -> int:
    row = conn.execute(sa.select(accounts.c.id).where(accounts.c.name == name)).first()
    if row:
        return int(row[0])
    result = conn.execute(sa.insert(accounts).values(name=name, created_at=int(time.time())))
    return int(result.inserted_primary_key[0])  # type: ignore[index]


def create_key(
    conn: sa.Connection, *, account: str, prefix: str, scopes: str, label: str | None = None
) -> tuple[str, KeyInfo]:
    """Create a key and return its plaintext once; only the hash is stored."""
    scope_set = parse_scopes(scopes)
    account_id = ensure_account(conn, account)
    key = new_key(prefix)
    now = int(time.time())
    result = conn.execute(
        sa.insert(api_keys).values(
            account_id=account_id,
            prefix=display_prefix(key),
            key_hash=hash_key(key),
            scopes=",".join(sorted(scope_set)),
            label=label,
            created_at=now,
        )
    )
    key_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    return key, KeyInfo(key_id, account, display_prefix(key), sorted(scope_set), label, now, None)


def store_known_key(conn: sa.Connection, *, key: str, account: str, scopes: str, label: str) -> None:
    """Register a key whose plaintext is already known (the sandbox's shared testing key)."""
    account_id = ensure_account(conn, account)
    conn.execute(
        sa.insert(api_keys).values(
            account_id=account_id,
            prefix=display_prefix(key),
            key_hash=hash_key(key),
            scopes=",".join(sorted(parse_scopes(scopes))),
            label=label,
            created_at=int(time.time()),
        )
    )


def restrict_scopes(conn: sa.Connection, key: str, scopes: str) -> bool:
    """Give `key` exactly `scopes`; whether it had others."""
    wanted = ",".join(sorted(parse_scopes(scopes)))
    result = conn.execute(
        sa.update(api_keys)
        .where(api_keys.c.key_hash == hash_key(key), api_keys.c.scopes != wanted)
        .values(scopes=wanted)
    )
    return bool(result.rowcount)


def list_keys(conn: sa.Connection) -> list[KeyInfo]:
    rows = conn.execute(
        sa.select(api_keys, accounts.c.name.label("account"))
        .join(accounts, accounts.c.id == api_keys.c.account_id)
        .order_by(api_keys.c.id)
    ).mappings()
    return [
        KeyInfo(
            r["id"],
            r["account"],
            r["prefix"],
            r["scopes"].split(","),
            r["label"],
            r["created_at"],
            r["revoked_at"],
        )
        for r in rows
    ]


def revoke_key(conn: sa.Connection, key_id: int) -> bool:
    result = conn.execute(
        sa.update(api_keys)
        .where(api_keys.c.id == key_id, api_keys.c.revoked_at.is_(None))
        .values(revoked_at=int(time.time()))
    )
    return result.rowcount == 1


_RECORD = (
    sa.select(
        api_keys.c.id,
        api_keys.c.account_id,
        api_keys.c.key_hash,
        api_keys.c.scopes,
        player_keys.c.venue_id,
        player_keys.c.screen_id,
    )
    .select_from(api_keys.outerjoin(player_keys, player_keys.c.key_id == api_keys.c.id))
    .where(api_keys.c.revoked_at.is_(None))
)
"""Active keys with the screen a player-link key is bound to (player_keys' primary key is key_id: one row at
most), read in the same query so the hot path checks the binding without one of its own."""


def _records(rows: sa.Result[tuple[int, int, str, str, str | None, str | None]]) -> dict[str, KeyRecord]:
    return {
        r.key_hash: KeyRecord(
            r.id,
            r.account_id,
            frozenset(r.scopes.split(",")),
            None if r.venue_id is None else (r.venue_id, r.screen_id),
        )
        for r in rows
    }


def active_keys(conn: sa.Connection) -> dict[str, KeyRecord]:
    return _records(conn.execute(_RECORD))


def keys_by_hash(conn: sa.Connection, hashes: Sequence[str]) -> dict[str, KeyRecord]:
    """The active keys among `hashes`, by hash: one query on the unique key_hash index (auth/lookup.py)."""
    return _records(conn.execute(_RECORD.where(api_keys.c.key_hash.in_(hashes))))
