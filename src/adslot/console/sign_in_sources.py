"""Sign-in throttling per client address, beside the per-account lock (users.py): one address trying
many accounts, a handful of guesses each, would never lock any of them.

An address's failed sign-ins, on any account or none, are counted for an hour after its last one; past
FREE_FAILURES each further failure locks the address for a while that doubles up to 15 minutes, during
which its sign-ins are refused before any password is checked. A success does not clear the count (an
attacker with an account of their own could clear it between guesses). IPv6 addresses count by their /64,
the block one host is given. The counts live in the production database, as the accounts' do, so they
hold across every worker and node.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from adslot.storage.tables import console_sign_in_sources as sources

FREE_FAILURES = 20
"""Failed sign-ins from one address before it is locked: a team behind one NAT mistyping passwords
stays well under it within an hour."""
FIRST_LOCK_SECONDS = 30
MAX_LOCK_SECONDS = 15 * 60
FORGET_SECONDS = 60 * 60
"""An address whose last failure is older than this starts again from nothing (its row is deleted)."""


def source_of(address: str | None) -> str:
    """The key an address is counted under: itself, an IPv6 one's /64, "unknown" without one."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


def lock_seconds(failures: int) -> int:
    if failures < FREE_FAILURES:
        return 0
    return int(min(FIRST_LOCK_SECONDS * 2 ** (failures - FREE_FAILURES), MAX_LOCK_SECONDS))


@dataclass(frozen=True, slots=True)
class Failed:
    failures: int
    locked_for: int


def locked_for(conn: sa.Connection, source: str, now: int) -> int:
    """Seconds until the address may try again; 0 when it may now."""
    until = conn.execute(sa.select(sources.c.locked_until).where(sources.c.source == source)).scalar()
    return max(0, int(until or 0) - now)


def record_failure(conn: sa.Connection, source: str, now: int) -> Failed:
    """Count a failed sign-in of the address, in the sign-in's write transaction. The increment is one
    upsert, so concurrent failures on several workers each count."""
    conn.execute(sa.delete(sources).where(sources.c.last_failed_at < now - FORGET_SECONDS))
    insert = (postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert)(sources)
    upsert = insert.values(source=source, failures=1, last_failed_at=now, locked_until=0)
    upsert = upsert.on_conflict_do_update(
        index_elements=[sources.c.source],
        set_={"failures": sources.c.failures + 1, "last_failed_at": now},
    )
    conn.execute(upsert)
    failures = int(conn.execute(sa.select(sources.c.failures).where(sources.c.source == source)).scalar_one())
    lock = lock_seconds(failures)
    if lock:
        conn.execute(sa.update(sources).where(sources.c.source == source).values(locked_until=now + lock))
    return Failed(failures, lock)
