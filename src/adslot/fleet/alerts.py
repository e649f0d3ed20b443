"""Which alerts a look at the fleet raises and which it clears. Pure: the checker feeds it rows and times.

An alert is an episode with a key, (kind, venue, screen, episode), that every node computes alike from the
same rows, so the database's unique key makes one node's insert the only one, and each episode is raised
once however often it is looked at:
- screen_silent: a screen seen before whose last ad request is `silent` seconds of open hours old (silence
  while its venue is closed does not count, nor does a venue closed now raise anything); its episode is that
  last request, and it clears when the screen asks again. A screen never seen raises nothing.
- venue_dark: every seen screen of a venue of two or more is silent so: one alert for the venue (episode:
  its latest last request) instead of one per screen. A silent screen whose venue-mates were still heard
  from within a threshold after it went quiet is held back a look or two, so that screens stopping together
  make one venue alert and not a few screen alerts first.
- not_playing: over a window of `window` seconds a screen got ads but counted fewer plays than `share` of
  them (its player is broken, not its network); decided by the node that rolls the window (checker.py).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from adslot.fleet.hours import is_open, open_seconds
from adslot.fleet.status import Seen, VenueInfo

Kind = Literal["screen_silent", "venue_dark", "not_playing"]
MIN_FILLS = 3
"""Fills a window needs before its plays are judged: a screen that got one ad has not shown a pattern."""


@dataclass(frozen=True, slots=True)
class AlertKey:
    kind: str
    venue_id: str
    screen_id: str
    """"" for a venue alert."""
    episode: int


@dataclass(frozen=True, slots=True)
class OpenAlert:
    id: int
    key: AlertKey


def _silent(seen: Seen, venue: VenueInfo | None, now: float, silent: int) -> bool:
    """Silent for `silent` seconds of its venue's open hours (all of them without hours)."""
    last = seen.last_request_at
    if last is None or now - last < silent:
        return False
    if venue is None:
        return True
    return open_seconds(venue.hours, venue.timezone, last, now) >= silent


def silence_alerts(
    seen: Iterable[Seen], venues: Mapping[str, VenueInfo], now: float, silent: int
) -> list[AlertKey]:
    """The silence alerts the fleet calls for now (raised already or not)."""
    by_venue: dict[str, list[Seen]] = defaultdict(list)
    for row in seen:
        if row.last_request_at is not None:
            by_venue[row.venue_id].append(row)
    wanted: list[AlertKey] = []
    for venue_id, rows in sorted(by_venue.items()):
        venue = venues.get(venue_id)
        if venue is not None and not is_open(venue.hours, venue.timezone, now):
            continue
        quiet = [r for r in rows if _silent(r, venue, now, silent)]
        if not quiet:
            continue
        if len(rows) >= 2 and len(quiet) == len(rows):
            latest = max(r.last_request_at or 0 for r in rows)
            wanted.append(AlertKey("venue_dark", venue_id, "", latest))
            continue
        for row in quiet:
            last = row.last_request_at or 0
            if len(rows) == 1 or any(
                (other.last_request_at or 0) >= last + silent for other in rows if other is not row
            ):
                wanted.append(AlertKey("screen_silent", venue_id, row.screen_id, last))
    return wanted


def cleared(open_alerts: Sequence[OpenAlert], seen: Iterable[Seen]) -> list[OpenAlert]:
    """The open silence alerts whose screen (or any screen of whose venue) asked since the episode began."""
    last: dict[tuple[str, str], int] = {}
    venue_last: dict[str, int] = {}
    for row in seen:
        if row.last_request_at is not None:
            last[row.venue_id, row.screen_id] = row.last_request_at
            venue_last[row.venue_id] = max(venue_last.get(row.venue_id, 0), row.last_request_at)
    out = []
    for alert in open_alerts:
        key = alert.key
        if key.kind == "screen_silent":
            heard = last.get((key.venue_id, key.screen_id), 0)
        elif key.kind == "venue_dark":
            heard = venue_last.get(key.venue_id, 0)
        else:
            continue
        if heard > key.episode:
            out.append(alert)
    return out


def new_alerts(wanted: Iterable[AlertKey], open_alerts: Sequence[OpenAlert]) -> list[AlertKey]:
    """What is wanted and not open yet (an episode open under its key is never raised twice)."""
    known = {alert.key for alert in open_alerts}
    return [key for key in wanted if key not in known]


def playing_verdict(fills: int, plays: int, share: float) -> bool | None:
    """Over a closed window: False when the screen got ads but played under `share` of them, True when it
    played enough, None when it got too few ads to tell."""
    if fills < MIN_FILLS:
        return None
    return plays >= share * fills


def describe(key: AlertKey, venue_name: str | None = None) -> str:
    where = f"{venue_name or key.venue_id}" + (f" / {key.screen_id}" if key.screen_id else "")
    return {
        "screen_silent": f"screen {where} is silent",
        "venue_dark": f"every screen of venue {where} is silent",
        "not_playing": f"screen {where} gets ads but does not play them",
    }.get(key.kind, key.kind)
