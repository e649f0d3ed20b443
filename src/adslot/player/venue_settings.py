"""Each venue's player settings: slot length, how far ahead it asks, its fallback media. Read by the player's
config call; a venue without a row plays the defaults and the built-in house image."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgspec
import sqlalchemy as sa

from adslot.errors import ApiError
from adslot.storage.tables import venue_players, venues

SLOT_SECONDS = 15
LEAD_SECONDS = 30
"""A 15 s slot asked 30 s ahead: two ads held, so a dropped network costs no slot for half a minute."""
MAX_SECONDS = 3600
MAX_FALLBACKS = 20


@dataclass(frozen=True)
class PlayerSettings:
    slot_seconds: int = SLOT_SECONDS
    lead_seconds: int = LEAD_SECONDS
    fallback_urls: list[str] = field(default_factory=list)


def check(slot_seconds: int, lead_seconds: int, fallback_urls: list[str]) -> PlayerSettings:
    """The settings, or the ApiError naming the first bad field."""
    for name, value in (("slot_seconds", slot_seconds), ("lead_seconds", lead_seconds)):
        if not 1 <= value <= MAX_SECONDS:
            raise ApiError(400, "out_of_range", f"{name} must be from 1 to {MAX_SECONDS}", name)
    if len(fallback_urls) > MAX_FALLBACKS:
        raise ApiError(400, "too_many", f"at most {MAX_FALLBACKS} fallback URLs", "fallback_urls")
    for index, url in enumerate(fallback_urls):
        if not (url.startswith(("https://", "http://", "/")) and len(url) <= 2048 and url.isprintable()):
            raise ApiError(
                400,
                "invalid_url",
                "a fallback URL is http(s) or a path of this server",
                f"fallback_urls[{index}]",
            )
    return PlayerSettings(slot_seconds, lead_seconds, list(fallback_urls))


def read(conn: sa.Connection, venue_id: str) -> PlayerSettings:
    row = (
        conn.execute(sa.select(venue_players).where(venue_players.c.venue_id == venue_id)).mappings().first()
    )
    if row is None:
        return PlayerSettings()
    return PlayerSettings(row["slot_seconds"], row["lead_seconds"], msgspec.json.decode(row["fallback_urls"]))


def write(conn: sa.Connection, venue_id: str, settings: PlayerSettings) -> None:
    if conn.execute(sa.select(venues.c.venue_id).where(venues.c.venue_id == venue_id)).first() is None:
        raise ApiError(404, "unknown_venue", f"venue {venue_id!r} is not registered", "venue_id")
    values = {
        "slot_seconds": settings.slot_seconds,
        "lead_seconds": settings.lead_seconds,
        "fallback_urls": msgspec.json.encode(settings.fallback_urls).decode(),
    }
    updated = conn.execute(
        sa.update(venue_players).where(venue_players.c.venue_id == venue_id).values(values)
    )
    if not updated.rowcount:
        conn.execute(sa.insert(venue_players).values(venue_id=venue_id, **values))
