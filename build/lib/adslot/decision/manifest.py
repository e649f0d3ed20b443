"""What a screen may play in a coming window, so that players can pre-cache creatives before they are chosen.

It over-approximates on purpose: caps, pacing, frequency and separation are ignored (they change by the
minute), so a creative listed here may not play, but a creative that can play is never missing from it.
"""

from __future__ import annotations

from adslot.decision.index import Choice, DecisionIndex
from adslot.decision.model import ALL_HOURS, ScreenProfile, VenueProfile
from adslot.decision.slot import hour_of_week

GRID_SECONDS = 900
"""Every offset in the time zone database in use today is a multiple of 15 minutes, so every local hour begins
on this UTC grid; visiting its points (plus the window's start) visits every local hour the window touches."""

WHOLE_WEEK_SECONDS = 15 * 86_400
"""A window this long contains every local hour of the week at least twice, and no time zone skips the same
hour twice within it, so it needs no walk."""


def upcoming(
    index: DecisionIndex,
    venue: VenueProfile,
    screen_id: str | None,
    screen: ScreenProfile | None,
    start: int,
    end: int,
) -> list[Choice]:
    """Every (campaign, creative) that may play at this venue and screen at some time in [start, end).

    A campaign qualifies when its flight overlaps the window and one of the local hours in the overlap is in
    its daypart; its targeting and exclusions allow the venue and screen; the creative fits the screen. Sorted
    by campaign id, then creative id.
    """
    if end <= start:
        return []
    hours_by_span: dict[tuple[int, int], int] = {}
    found: list[Choice] = []
    for pool in index.screen_pools(venue, screen_id, screen).tiers:
        for candidate in pool.all():
            lo, hi = max(start, candidate.start_at), min(end, candidate.end_at)
            if lo >= hi:
                continue
            span = (lo, hi)
            mask = hours_by_span.get(span)
            if mask is None:
                mask = hours_by_span[span] = hours_touched(venue.timezone, lo, hi)
            if candidate.hours_of_week & mask:
                found.extend(candidate.choices)
    found.sort(key=lambda choice: (choice.campaign.id, choice.creative.id))
    return found


def hours_touched(tz_name: str, start: int, end: int) -> int:
    """The mask of venue-local hours of the week that some instant in [start, end) falls in."""
    if end - start >= WHOLE_WEEK_SECONDS:
        return ALL_HOURS
    mask = 1 << hour_of_week(tz_name, start)
    instant = (start // GRID_SECONDS + 1) * GRID_SECONDS
    while instant < end and mask != ALL_HOURS:
        mask |= 1 << hour_of_week(tz_name, instant)
        instant += GRID_SECONDS
    return mask
