"""A campaign's proof-of-play report: the API's delivery report of the campaign over a period, shaped for a
page to print (totals, plays per day and per hour of the day, per venue and per screen, a sample of the
play log in each venue's time zone).

Every figure is a row or a total of the API's own delivery report (reporting.repository.delivery_report)
filtered by the campaign: the report and the API agree to the play. A campaign's plays are its direct plays;
programmatic plays have no campaign and are never in it.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from adslot.console.charts import Series, bar_chart, line_chart
from adslot.errors import ApiError
from adslot.reporting.schemas import DeliveryReport, DeliveryRow, Metrics, PlayRow

MAX_PERIOD_DAYS = 732
"""The longest period one report covers (two years): its charts draw a point a day."""
DAY = 86_400
SAMPLE_PLAYS = 50
"""Plays of the log shown on the page (the most recent in the period); the CSV carries the figures."""
METHODOLOGY = (
    (
        "A play",
        "an ad request filled with one of this campaign's creatives whose impression was counted: the "
        "player's impression fire, or its offline proof-of-play record, for the time the ad was to play. "
        "Plays are counted at their play time.",
    ),
    (
        "Impressions",
        "each play is worth the venue's audience multiplier (impressions per play, by hour of the week when "
        "the venue has one) as it was when the ad was requested; the impressions are their sum.",
    ),
    (
        "Duplicates",
        "a repeated fire of an event already counted (the same impression or quartile again) is kept as a "
        "duplicate and never counted twice.",
    ),
    (
        "Late fires",
        "a fire that arrives after its ad request expired is kept as late and not counted; an ad request "
        "that expired unplayed, or that the player gave back, is no play.",
    ),
    (
        "Invalid traffic",
        "fires flagged by the invalid-traffic rules (quartiles faster than the creative allows, events "
        "out of order, fires from another network than the ad request's, bursts of first impressions) are "
        "kept apart and never counted or billed.",
    ),
    (
        "Programmatic",
        "plays that a demand partner won through an auction belong to the buyer and are not in this report.",
    ),
)


def report_period(flight: tuple[int, int], start: int | None, end: int | None, now: int) -> tuple[int, int]:
    """[start, end) of a report: the dates asked, else the campaign's flight; a flight longer than
    MAX_PERIOD_DAYS is shown from a year ago (or its start) for MAX_PERIOD_DAYS. 400 for a period that ends
    before it starts or is longer than that."""
    if start is None and end is None and flight[1] - flight[0] > MAX_PERIOD_DAYS * DAY:
        first = max(flight[0], min(now - now % DAY - 366 * DAY, flight[1] - MAX_PERIOD_DAYS * DAY))
        return first, first + MAX_PERIOD_DAYS * DAY
    first = flight[0] if start is None else start
    last = flight[1] if end is None else end
    if last <= first:
        raise ApiError(400, "invalid_field", "to must be after from", "to")
    if last - first > MAX_PERIOD_DAYS * DAY:
        raise ApiError(400, "invalid_field", f"a report covers at most {MAX_PERIOD_DAYS} days", "to")
    return first, last


@dataclass(frozen=True, slots=True)
class PlaceRow:
    """A venue (or one screen of it) where the campaign played, with its figures."""

    venue_id: str
    name: str
    place: str
    timezone: str
    screen_id: str | None
    screen_name: str | None
    plays: int
    impressions: float
    completes: int


@dataclass(frozen=True, slots=True)
class SamplePlay:
    local_time: str
    venue: str
    screen: str
    creative: str
    impressions: float
    completed: bool


def place_of(venue: Mapping[str, Any]) -> str:
    """City, region, country: what of them the venue has, else its coordinates, else a dash."""
    parts = [str(venue[k]) for k in ("city", "region", "country") if venue.get(k)]
    if parts:
        return ", ".join(parts)
    if venue.get("latitude") is not None and venue.get("longitude") is not None:
        return f"{venue['latitude']:.4f}, {venue['longitude']:.4f}"
    return "—"


def places(
    rows: Sequence[DeliveryRow],
    venues: Mapping[str, Mapping[str, Any]],
    screens: Mapping[tuple[str, str], str | None],
    *,
    by_screen: bool,
) -> list[PlaceRow]:
    """The report's rows by venue (summed over screens) or by venue and screen, most plays first."""
    sums: dict[tuple[str, str | None], list[float]] = {}
    for row in rows:
        venue_id = str(row.venue_id)
        screen = row.screen_id if by_screen and isinstance(row.screen_id, str) else None
        total = sums.setdefault((venue_id, screen), [0, 0.0, 0])
        total[0] += row.plays
        total[1] += row.impressions
        total[2] += row.completes
    out = []
    for (venue_id, screen), (plays, impressions, completes) in sums.items():
        venue = venues.get(venue_id, {})
        out.append(
            PlaceRow(
                venue_id=venue_id,
                name=str(venue.get("name") or venue_id),
                place=place_of(venue),
                timezone=str(venue.get("timezone") or "UTC"),
                screen_id=screen,
                screen_name=screens.get((venue_id, screen)) if screen else None,
                plays=int(plays),
                impressions=round(impressions, 3),
                completes=int(completes),
            )
        )
    return sorted((p for p in out if p.plays), key=lambda p: (-p.plays, p.venue_id, p.screen_id or ""))


def days_chart(report: DeliveryReport) -> Markup:
    """Plays per day of the period, in the report's time zone, days without plays included."""
    zone = zoneinfo.ZoneInfo(report.timezone)
    first = dt.datetime.fromtimestamp(report.from_, zone).date()
    last = dt.datetime.fromtimestamp(report.to - 1, zone).date()
    plays = {str(r.day): float(r.plays) for r in report.rows}
    days = [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]
    return line_chart(
        [f"{d:%a} {d.day} {d:%b}" for d in days],
        [Series("plays", [plays.get(d.isoformat(), 0.0) for d in days])],
        title=f"Plays per day ({report.timezone})",
    )


def hours_chart(report: DeliveryReport) -> Markup:
    """Plays per hour of the day over the whole period, in the report's time zone."""
    plays = [0.0] * 24
    for row in report.rows:
        plays[int(str(row.hour)[11:13])] += row.plays
    return bar_chart(
        [f"{h:02d}:00 to {h:02d}:59" for h in range(24)],
        [Series("plays", plays)],
        title=f"Plays per hour of the day ({report.timezone})",
    )


def invalid_of(totals: Metrics) -> int:
    invalid = totals.invalid
    return invalid.too_fast + invalid.out_of_order + invalid.foreign_network + invalid.burst


def sample(
    plays: Sequence[PlayRow],
    venues: Mapping[str, Mapping[str, Any]],
    screens: Mapping[tuple[str, str], str | None],
    creatives: Mapping[int, str],
) -> list[SamplePlay]:
    """Played ad requests as the report shows them: the play time in its venue's own time zone."""
    out = []
    for play in plays:
        venue = venues.get(play.venue_id, {})
        zone = zoneinfo.ZoneInfo(str(venue.get("timezone") or "UTC"))
        local = dt.datetime.fromtimestamp(play.play_time, zone)
        screen = play.screen_id or ""
        out.append(
            SamplePlay(
                local_time=f"{local:%Y-%m-%d %H:%M:%S} {local.tzname()}",
                venue=str(venue.get("name") or play.venue_id),
                screen=(screens.get((play.venue_id, screen)) or screen) if screen else "—",
                creative=creatives.get(play.creative_id or 0, str(play.creative_id)),
                impressions=play.impressions,
                completed=play.complete_at is not None,
            )
        )
    return out
