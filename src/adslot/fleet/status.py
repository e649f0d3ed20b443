"""Each screen's status from what the ledger writer keeps (screen_status) and what is registered. Pure.

online: its last ad request is more recent than the silence threshold; silent: older (since that request);
never_seen: registered, no request ever; closed: its venue is closed now and it is not online (silence while
closed is no fault). A screen that asks without being registered is listed on its venue with
`registered` false.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from adslot.fleet.hours import Schedule, is_open

Status = Literal["online", "silent", "never_seen", "closed"]
STATUSES: tuple[Status, ...] = ("silent", "online", "closed", "never_seen")
"""In the order a list shows them: the silent first."""


@dataclass(frozen=True, slots=True)
class Seen:
    """A screen_status row: what the ledger writer last saw of one screen."""

    venue_id: str
    screen_id: str
    first_seen_at: int
    last_request_at: int | None
    last_fill_at: int | None
    last_play_at: int | None


@dataclass(frozen=True, slots=True)
class VenueInfo:
    venue_id: str
    name: str
    timezone: str
    tags: tuple[str, ...] = ()
    hours: Schedule | None = None


@dataclass(slots=True)
class ScreenState:
    venue_id: str
    screen_id: str
    name: str | None
    registered: bool
    status: Status
    silent_since: int | None
    last_request_at: int | None
    last_play_at: int | None
    tags: tuple[str, ...] = ()
    requests_today: int = 0
    fills_today: int = 0
    plays_today: int = 0
    hourly: list[tuple[int, int, int]] = field(default_factory=list)
    """The last 24 UTC hours, oldest first: (requests, fills, plays) each."""
    player: Mapping[str, object] | None = None
    """The reference player's own report (player_status), where it sends one."""

    @property
    def fill_rate(self) -> float | None:
        return None if not self.requests_today else self.fills_today / self.requests_today


def status_of(seen: Seen | None, venue: VenueInfo | None, now: float, silent_seconds: int) -> Status:
    if seen is None or seen.last_request_at is None:
        return "never_seen"
    if now - seen.last_request_at < silent_seconds:
        return "online"
    if venue is not None and not is_open(venue.hours, venue.timezone, now):
        return "closed"
    return "silent"


def screen_states(
    registered: Iterable[tuple[str, str, str | None]],
    seen: Iterable[Seen],
    venues: Mapping[str, VenueInfo],
    now: float,
    silent_seconds: int,
) -> list[ScreenState]:
    """Every registered screen (venue, screen, name) and every seen one, with its status, silent first,
    then by venue and screen."""
    by_key = {(s.venue_id, s.screen_id): s for s in seen}
    out: list[ScreenState] = []
    names: dict[tuple[str, str], str | None] = {(v, s): n for v, s, n in registered}
    for key in sorted(set(names) | set(by_key)):
        venue_id, screen_id = key
        row = by_key.get(key)
        venue = venues.get(venue_id)
        status = status_of(row, venue, now, silent_seconds)
        out.append(
            ScreenState(
                venue_id=venue_id,
                screen_id=screen_id,
                name=names.get(key),
                registered=key in names,
                status=status,
                silent_since=row.last_request_at if row is not None and status == "silent" else None,
                last_request_at=row.last_request_at if row else None,
                last_play_at=row.last_play_at if row else None,
                tags=venue.tags if venue else (),
            )
        )
    order = {status: i for i, status in enumerate(STATUSES)}
    out.sort(key=lambda s: (order[s.status], s.venue_id, s.screen_id))
    return out


def counts(states: Iterable[ScreenState]) -> dict[str, int]:
    """Screens per status, every status present (0 when none), and `unregistered`."""
    totals = dict.fromkeys((*STATUSES, "unregistered"), 0)
    for state in states:
        totals[state.status] += 1
        if not state.registered:
            totals["unregistered"] += 1
    return totals
