"""Builders of live campaigns and creatives for decision tests."""

from __future__ import annotations

from adslot.decision.index import Creative, LiveCampaign

START = 1_700_000_000
END = START + 86_400


def creative(creative_id: int, campaign_id: int = 1) -> Creative:
    return Creative(
        id=creative_id,
        campaign_id=campaign_id,
        name=f"creative {creative_id}",
        media_url=f"https://cdn.example.test/{creative_id}.mp4",
        mime_type="video/mp4",
        width=1920,
        height=1080,
        duration_seconds=15,
        bitrate_kbps=None,
    )


def campaign(
    campaign_id: int,
    *,
    venues: tuple[str, ...] = (),
    all_venues: bool = False,
    creatives: int | tuple[Creative, ...] = 1,
    start_at: int = START,
    end_at: int = END,
) -> LiveCampaign:
    made = (
        tuple(creative(campaign_id * 100 + n, campaign_id) for n in range(creatives))
        if isinstance(creatives, int)
        else creatives
    )
    return LiveCampaign(
        id=campaign_id,
        advertiser_id=1,
        name=f"campaign {campaign_id}",
        start_at=start_at,
        end_at=end_at,
        all_venues=all_venues,
        venue_ids=frozenset(venues),
        creatives=made,
    )
