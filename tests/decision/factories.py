"""Builders of live campaigns, creatives, venues and slots for decision tests."""

from __future__ import annotations

import calendar

from adslot.decision.model import (
    ALL_HOURS,
    Creative,
    LiveCampaign,
    ScreenProfile,
    Targeting,
    Tier,
    VenueProfile,
)
from adslot.decision.slot import Slot, make_slot

START = calendar.timegm((2026, 1, 5, 0, 0, 0))
"""Monday 2026-01-05 00:00 UTC: hour of week 0 in a UTC venue, so hours in tests read as offsets from here."""
END = START + 7 * 86_400
HOUR = 3600


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    """An epoch from a UTC calendar time, without going through the time zone code under test."""
    return calendar.timegm((year, month, day, hour, minute, 0))


def creative(
    creative_id: int,
    campaign_id: int = 1,
    *,
    width: int = 1920,
    height: int = 1080,
    mime_type: str = "video/mp4",
    duration_seconds: int = 15,
    weight: int = 100,
) -> Creative:
    return Creative(
        id=creative_id,
        campaign_id=campaign_id,
        name=f"creative {creative_id}",
        media_url=f"https://cdn.example.test/{creative_id}.mp4",
        mime_type=mime_type,
        width=width,
        height=height,
        duration_seconds=duration_seconds,
        bitrate_kbps=None,
        weight=weight,
    )


def campaign(
    campaign_id: int,
    *,
    venues: tuple[str, ...] = (),
    targeting: Targeting | None = None,
    exclusions: Targeting | None = None,
    tier: Tier = "standard",
    weight: int = 100,
    share_of_voice: float | None = None,
    hours_of_week: int = ALL_HOURS,
    creatives: int | tuple[Creative, ...] = 1,
    start_at: int = START,
    end_at: int = END,
) -> LiveCampaign:
    """``venues`` is a shortcut for a venue-id targeting; no venues and no targeting runs everywhere."""
    made = (
        tuple(creative(campaign_id * 100 + n, campaign_id) for n in range(creatives))
        if isinstance(creatives, int)
        else creatives
    )
    if targeting is None:
        targeting = Targeting(venue_ids=frozenset(venues))
    return LiveCampaign(
        id=campaign_id,
        advertiser_id=1,
        name=f"campaign {campaign_id}",
        start_at=start_at,
        end_at=end_at,
        tier=tier,
        weight=weight,
        targeting=targeting,
        exclusions=exclusions or Targeting(),
        hours_of_week=hours_of_week,
        share_of_voice=share_of_voice,
        creatives=made,
    )


def slot(
    where: VenueProfile | str = "v1",
    play_time: int = START,
    *,
    screen_id: str | None = None,
    screen: ScreenProfile | None = None,
) -> Slot:
    place = where if isinstance(where, VenueProfile) else VenueProfile(where)
    if screen is not None and screen_id is None:
        screen_id = screen.screen_id
    return make_slot(place, screen_id, screen, play_time)
