"""Venues and screens: the operator's own inventory, keyed by the operator's venue_id."""

from __future__ import annotations

import time
import zoneinfo

import msgspec
import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.inventory.schemas import Screen, ScreenIn, Venue, VenueIn, VenuePatch
from adslot.storage.database import as_dict
from adslot.storage.tables import screens, venues


def _check_timezone(name: str) -> None:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ApiError(422, "invalid_timezone", f"{name!r} is not an IANA time zone", "timezone") from exc


def create_venue(conn: sa.Connection, data: VenueIn) -> Venue:
    _check_timezone(data.timezone)
    if conn.execute(sa.select(venues.c.venue_id).where(venues.c.venue_id == data.venue_id)).first():
        raise ApiError(409, "venue_exists", f"venue {data.venue_id!r} exists", "venue_id")
    values = msgspec.structs.asdict(data) | {"created_at": int(time.time())}
    conn.execute(sa.insert(venues).values(**values))
    return get_venue(conn, data.venue_id)


def update_venue(conn: sa.Connection, venue_id: str, patch: VenuePatch) -> Venue:
    get_venue(conn, venue_id)
    values = {k: v for k, v in msgspec.structs.asdict(patch).items() if v is not None}
    if "timezone" in values:
        _check_timezone(values["timezone"])
    if values:
        conn.execute(sa.update(venues).where(venues.c.venue_id == venue_id).values(**values))
    return get_venue(conn, venue_id)


def _screens(conn: sa.Connection, venue_id: str | None = None) -> dict[str, list[Screen]]:
    query = sa.select(screens).order_by(screens.c.venue_id, screens.c.screen_id)
    if venue_id is not None:
        query = query.where(screens.c.venue_id == venue_id)
    out: dict[str, list[Screen]] = {}
    for r in conn.execute(query).mappings():
        out.setdefault(r["venue_id"], []).append(msgspec.convert(as_dict(r), Screen))
    return out


def list_venues(conn: sa.Connection) -> list[Venue]:
    by_venue = _screens(conn)
    rows = conn.execute(sa.select(venues).order_by(venues.c.venue_id)).mappings()
    return [msgspec.convert(as_dict(r) | {"screens": by_venue.get(r["venue_id"], [])}, Venue) for r in rows]


def get_venue(conn: sa.Connection, venue_id: str) -> Venue:
    row = conn.execute(sa.select(venues).where(venues.c.venue_id == venue_id)).mappings().first()
    if row is None:
        raise ApiError(404, "venue_not_found", f"no venue {venue_id!r}", "venue_id")
    return msgspec.convert(as_dict(row) | {"screens": _screens(conn, venue_id).get(venue_id, [])}, Venue)


def add_screen(conn: sa.Connection, venue_id: str, data: ScreenIn) -> Screen:
    get_venue(conn, venue_id)
    exists = conn.execute(
        sa.select(screens.c.screen_id).where(
            screens.c.venue_id == venue_id, screens.c.screen_id == data.screen_id
        )
    ).first()
    if exists:
        raise ApiError(409, "screen_exists", f"screen {data.screen_id!r} exists in {venue_id!r}", "screen_id")
    values = msgspec.structs.asdict(data) | {"venue_id": venue_id, "created_at": int(time.time())}
    conn.execute(sa.insert(screens).values(**values))
    return msgspec.convert(values, Screen)


def venue_ids(conn: sa.Connection) -> frozenset[str]:
    return frozenset(r[0] for r in conn.execute(sa.select(venues.c.venue_id)))
