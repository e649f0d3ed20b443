"""Reading the fleet: screens, their status rows, the day's figures and venues' opening hours.

What a page or the API reads is keyed: screen_status (one row per screen), and per listed screen a range of
24 hours of request_stats and screen_plays by primary key; never the ad requests.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

import sqlalchemy as sa

from adslot.fleet.hours import Schedule, loads
from adslot.fleet.status import ScreenState, Seen, VenueInfo, screen_states
from adslot.player.links import player_states
from adslot.player.status import read_player_states
from adslot.storage.tables import (
    environment_meta,
    request_stats,
    screen_plays,
    screen_status,
    screens,
    venue_hours,
    venues,
)

HOUR = 3600
SILENT_KEY = "alerts.silent_seconds"
"""environment_meta's entry holding the environment's own silence threshold (set in the console or API)."""
NOT_PLAYING_SHARE_KEY = "alerts.not_playing_share"
EMAILS_KEY = "alerts.emails"


def read_meta(conn: sa.Connection, name: str) -> str | None:
    m = environment_meta.c
    return conn.execute(sa.select(m.value).where(m.name == name)).scalar_one_or_none()


def write_meta(conn: sa.Connection, name: str, value: str | None) -> None:
    m = environment_meta.c
    conn.execute(sa.delete(environment_meta).where(m.name == name))
    if value is not None:
        conn.execute(sa.insert(environment_meta).values(name=name, value=value))


def silent_seconds(conn: sa.Connection, default: int) -> int:
    """The environment's own threshold where set, else the setting's (ADSLOT_SCREEN_SILENT_SECONDS)."""
    own = read_meta(conn, SILENT_KEY)
    return int(own) if own else default


def load_venues(conn: sa.Connection) -> dict[str, VenueInfo]:
    v, h = venues.c, venue_hours.c
    rows = conn.execute(
        sa.select(v.venue_id, v.name, v.timezone, v.tags, h.schedule).select_from(
            venues.outerjoin(venue_hours, v.venue_id == h.venue_id)
        )
    ).all()
    return {
        r.venue_id: VenueInfo(
            r.venue_id, r.name, r.timezone, tuple(json.loads(r.tags or "[]")), loads(r.schedule)
        )
        for r in rows
    }


def get_hours(conn: sa.Connection, venue_id: str) -> Schedule | None:
    h = venue_hours.c
    return loads(conn.execute(sa.select(h.schedule).where(h.venue_id == venue_id)).scalar_one_or_none())


def set_hours(conn: sa.Connection, venue_id: str, schedule: Schedule | None) -> None:
    conn.execute(sa.delete(venue_hours).where(venue_hours.c.venue_id == venue_id))
    if schedule is not None:
        conn.execute(sa.insert(venue_hours).values(venue_id=venue_id, schedule=schedule.dumps()))


def read_seen(conn: sa.Connection, venue_id: str | None = None) -> list[Seen]:
    s = screen_status.c
    query = sa.select(
        s.venue_id, s.screen_id, s.first_seen_at, s.last_request_at, s.last_fill_at, s.last_play_at
    )
    if venue_id is not None:
        query = query.where(s.venue_id == venue_id)
    return [Seen(*row) for row in conn.execute(query)]


def registered_screens(conn: sa.Connection, venue_id: str | None = None) -> list[tuple[str, str, str | None]]:
    c = screens.c
    query = sa.select(c.venue_id, c.screen_id, c.name)
    if venue_id is not None:
        query = query.where(c.venue_id == venue_id)
    return [(r.venue_id, r.screen_id, r.name) for r in conn.execute(query)]


def day_start(timezone: str, now: float) -> int:
    """The start of the venue's local day, down to its UTC hour (request_stats' unit)."""
    local = datetime.fromtimestamp(now, ZoneInfo(timezone)).replace(hour=0, minute=0, second=0, microsecond=0)
    start = int(local.timestamp())
    return start - start % HOUR


def fleet(
    conn: sa.Connection,
    now: float,
    silent: int,
    *,
    venue_id: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    figures: bool = True,
) -> list[ScreenState]:
    """Every screen with its status (filtered by venue, status or `unregistered`, and venue tag), silent
    first; with `figures`, each listed screen's day and last 24 hours too."""
    venue_map = load_venues(conn)
    states = screen_states(
        registered_screens(conn, venue_id), read_seen(conn, venue_id), venue_map, now, silent
    )
    if status == "unregistered":
        states = [s for s in states if not s.registered]
    elif status is not None:
        states = [s for s in states if s.status == status]
    if tag is not None:
        states = [s for s in states if tag in s.tags]
    if figures:
        add_figures(conn, states, venue_map, now)
    add_players(conn, states, venue_id)
    return states


def add_players(conn: sa.Connection, states: Sequence[ScreenState], venue_id: str | None) -> None:
    """The reference player's own report (player_status) and its link's state: "stopped" once every
    player key made for the screen is revoked (player/links.py)."""
    reports = {(r["venue_id"], r["screen_id"] or ""): r for r in read_player_states(conn, venue_id)}
    links = player_states(conn, venue_id)
    for state in states:
        key = (state.venue_id, state.screen_id)
        report, link = reports.get(key), links.get(key)
        if report is None and link is None:
            continue
        player: dict[str, object] = {"link": link}
        if report is not None:
            player |= {
                name: report.get(name)
                for name in ("version", "fires_queued", "cache_bytes", "last_error", "reported_at")
            }
        state.player = player


def add_figures(
    conn: sa.Connection, states: Sequence[ScreenState], venue_map: dict[str, VenueInfo], now: float
) -> None:
    """Requests, fills and plays today (the venue's local day) and per hour over the last 24 hours."""
    r, p = request_stats.c, screen_plays.c
    current = int(now) - int(now) % HOUR
    first = current - 23 * HOUR
    for state in states:
        venue = venue_map.get(state.venue_id)
        today = day_start(venue.timezone, now) if venue else current - 23 * HOUR
        since = min(first, today)
        hours: dict[int, list[int]] = {}
        for hour, requests, fills in conn.execute(
            sa.select(r.hour, r.requests, r.fills).where(
                r.venue_id == state.venue_id, r.screen_id == state.screen_id, r.hour >= since
            )
        ):
            hours.setdefault(hour, [0, 0, 0])[:2] = [requests, fills]
        for hour, plays in conn.execute(
            sa.select(p.hour, p.plays).where(
                p.venue_id == state.venue_id, p.screen_id == state.screen_id, p.hour >= since
            )
        ):
            hours.setdefault(hour, [0, 0, 0])[2] = plays
        for hour, (requests, fills, plays) in hours.items():
            if today <= hour <= current:
                state.requests_today += requests
                state.fills_today += fills
                state.plays_today += plays
        state.hourly = [tuple(hours.get(h, (0, 0, 0))) for h in range(first, current + 1, HOUR)]  # type: ignore[misc]
