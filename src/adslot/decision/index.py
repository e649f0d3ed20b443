"""The compiled, immutable view of live campaigns that a decision reads: built off the hot path."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Creative:
    id: int
    campaign_id: int
    name: str
    media_url: str
    mime_type: str
    width: int
    height: int
    duration_seconds: int
    bitrate_kbps: int | None


@dataclass(frozen=True, slots=True)
class LiveCampaign:
    id: int
    advertiser_id: int
    name: str
    start_at: int
    end_at: int
    all_venues: bool
    venue_ids: frozenset[str]
    creatives: tuple[Creative, ...]


@dataclass(frozen=True, slots=True)
class DecisionIndex:
    """Campaigns bucketed by targeted venue, plus those that run everywhere."""

    by_venue: dict[str, tuple[LiveCampaign, ...]]
    everywhere: tuple[LiveCampaign, ...]

    @classmethod
    def build(cls, campaigns: Iterable[LiveCampaign]) -> DecisionIndex:
        by_venue: dict[str, list[LiveCampaign]] = {}
        everywhere: list[LiveCampaign] = []
        for campaign in campaigns:
            if not campaign.creatives:
                continue
            if campaign.all_venues:
                # Venue rows kept from before it went all-venue must not make it a candidate twice.
                everywhere.append(campaign)
                continue
            for venue_id in campaign.venue_ids:
                by_venue.setdefault(venue_id, []).append(campaign)
        return cls(
            by_venue={venue: tuple(items) for venue, items in by_venue.items()},
            everywhere=tuple(everywhere),
        )

    def candidates(self, venue_id: str) -> tuple[LiveCampaign, ...]:
        targeted = self.by_venue.get(venue_id, ())
        return targeted + self.everywhere if targeted else self.everywhere
