"""Active campaigns compiled into the decision model's values, in a fixed handful of queries.

The catalog is rebuilt whenever anything changes, in every worker, so loading must not grow a query per
campaign: 10,000 campaigns are one campaigns query, one venue-list query and one creatives query.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

import sqlalchemy as sa

from adslot.campaigns.rules import CampaignRules
from adslot.campaigns.schemas import DAYS, TargetingRules
from adslot.decision import model
from adslot.decision.dayparts import Daypart, compile_dayparts
from adslot.storage.tables import advertisers, campaign_venues, campaigns, creatives


def all_creatives(conn: sa.Connection) -> tuple[dict[int, model.Creative], dict[int, list[model.Creative]]]:
    """Every creative ever defined (an issued ad request still renders after a pause), and the active ones
    by campaign, in id order."""
    every: dict[int, model.Creative] = {}
    active: dict[int, list[model.Creative]] = {}
    c = creatives.c
    columns = (c.id, c.campaign_id, c.name, c.media_url, c.mime_type, c.width, c.height, c.duration_seconds)
    extra = (c.bitrate_kbps, c.weight, c.size_bytes, c.sha256)
    for *fields, status in conn.execute(sa.select(*columns, *extra, c.status).order_by(c.id)).all():
        item = model.Creative(*fields)
        every[item.id] = item
        if status == "active":
            active.setdefault(item.campaign_id, []).append(item)
    return every, active


def live_campaigns(
    conn: sa.Connection, active_creatives: Mapping[int, list[model.Creative]]
) -> list[model.LiveCampaign]:
    """Every active campaign that can run somewhere, compiled; one that lists no venue is left out."""
    live = campaigns.c.status == "active"
    rows = conn.execute(
        sa.select(campaigns, advertisers.c.category)
        .join(advertisers, advertisers.c.id == campaigns.c.advertiser_id)
        .where(live)
        .order_by(campaigns.c.id)
    ).mappings()
    venue_lists: dict[int, list[str]] = {}
    for campaign_id, venue_id in conn.execute(
        sa.select(campaign_venues.c.campaign_id, campaign_venues.c.venue_id)
        .join(campaigns, campaigns.c.id == campaign_venues.c.campaign_id)
        .where(live, sa.not_(campaigns.c.all_venues))
    ):
        venue_lists.setdefault(campaign_id, []).append(venue_id)
    out = []
    for row in rows.all():
        venue_ids = None if row["all_venues"] else venue_lists.get(row["id"])
        if venue_ids is not None or row["all_venues"]:
            out.append(compile_campaign(row, venue_ids, tuple(active_creatives.get(row["id"], ()))))
    return out


def compile_campaign(
    row: Mapping[Any, Any], venue_ids: list[str] | None, items: tuple[model.Creative, ...]
) -> model.LiveCampaign:
    """One stored campaign (with its advertiser's category) as the decision reads it; venue_ids None means
    every venue."""
    rules = CampaignRules.from_row(row)
    stored = rules.rules
    return model.LiveCampaign(
        id=row["id"],
        advertiser_id=row["advertiser_id"],
        name=row["name"],
        start_at=row["start_at"],
        end_at=row["end_at"],
        tier=rules.tier,
        weight=rules.weight,
        timezone=rules.timezone,
        category=row["category"],
        targeting=compile_targeting(stored.targeting, venue_ids),
        exclusions=compile_targeting(stored.exclusions, None),
        hours_of_week=_hours(tuple((tuple(p.days), p.start_hour, p.end_hour) for p in stored.dayparts)),
        caps=tuple(model.Cap(c.period, c.metric, c.limit) for c in stored.caps),
        cpm_micros=rules.cpm_micros,
        pacing=rules.pacing,
        frequency=None
        if stored.frequency is None
        else model.FrequencyCap(stored.frequency.per_hour, stored.frequency.per_day),
        separation_minutes=rules.separation_minutes,
        share_of_voice=rules.share_of_voice,
        creatives=items,
    )


@lru_cache(maxsize=4096)
def _hours(parts: tuple[tuple[tuple[str, ...], int, int], ...]) -> int:
    """Dayparts as a mask; a network's campaigns share a few schedules, so each is compiled once."""
    return compile_dayparts(
        Daypart(tuple(DAYS.index(d) for d in days), start, end) for days, start, end in parts
    )


def compile_targeting(rules: TargetingRules | None, venue_ids: list[str] | None) -> model.Targeting:
    """Criteria as sets; an empty set is no criterion. venue_ids, when given, replaces the stored list
    (targeting keeps its venue list in campaign_venues)."""
    if rules is None:
        return model.Targeting(venue_ids=frozenset(venue_ids or ()))
    listed = rules.venue_ids if isinstance(rules.venue_ids, list) else None
    geo = rules.geo
    return model.Targeting(
        venue_ids=frozenset(venue_ids if venue_ids is not None else listed or ()),
        venue_types=frozenset(rules.venue_types or ()),
        venue_tags=frozenset(rules.venue_tags or ()),
        countries=frozenset(geo.countries or ()) if geo else frozenset(),
        regions=frozenset(geo.regions or ()) if geo else frozenset(),
        cities=frozenset(geo.cities or ()) if geo else frozenset(),
        radii=tuple(model.GeoRadius(r.latitude, r.longitude, r.radius_km) for r in geo.radius or ())
        if geo
        else (),
        screen_ids=frozenset(rules.screen_ids or ()),
        screens=frozenset((s.venue_id, s.screen_id) for s in rules.screens or ()),
    )
