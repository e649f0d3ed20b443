"""Advertisers, campaigns and creatives in the environment's database."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec
import sqlalchemy as sa
from msgspec import UNSET, UnsetType

from adslot.campaigns.rules import CampaignRules, amount, wire_cap
from adslot.campaigns.schemas import (
    Advertiser,
    AdvertiserIn,
    Campaign,
    CampaignIn,
    CampaignPatch,
    Creative,
    CreativeIn,
    CreativePatch,
    TargetingRules,
)
from adslot.errors import ApiError
from adslot.fields import MAX_ID
from adslot.storage.database import as_dict, conflict_as
from adslot.storage.tables import advertisers, campaign_venues, campaigns, creatives


def _check_flight(start_at: int, end_at: int) -> None:
    if end_at <= start_at:
        raise ApiError(422, "invalid_flight", "end_at must be after start_at", "end_at")


def create_advertiser(conn: sa.Connection, data: AdvertiserIn) -> Advertiser:
    exists = conn.execute(sa.select(advertisers.c.id).where(advertisers.c.name == data.name)).first()
    conflict = ApiError(409, "advertiser_exists", f"an advertiser named {data.name!r} exists", "name")
    if exists:
        raise conflict
    now = int(time.time())
    with conflict_as(conflict):
        result = conn.execute(
            sa.insert(advertisers).values(name=data.name, category=data.category, created_at=now)
        )
    return Advertiser(int(result.inserted_primary_key[0]), data.name, data.category, now)  # type: ignore[index]


def list_advertisers(conn: sa.Connection) -> list[Advertiser]:
    rows = conn.execute(sa.select(advertisers).order_by(advertisers.c.id)).mappings()
    return [msgspec.convert(as_dict(r), Advertiser) for r in rows]


def _advertiser_category(conn: sa.Connection, advertiser_id: int) -> str | None:
    """The advertiser's category (separation needs it); 422 when there is no such advertiser (an id above
    MAX_ID names none, and is not sent to a database whose ids it would overflow)."""
    row = None
    if advertiser_id <= MAX_ID:
        row = conn.execute(sa.select(advertisers.c.category).where(advertisers.c.id == advertiser_id)).first()
    if row is None:
        raise ApiError(422, "unknown_advertiser", f"no advertiser {advertiser_id}", "advertiser_id")
    return None if row[0] is None else str(row[0])


def _set_venues(conn: sa.Connection, campaign_id: int, venue_ids: Iterable[str]) -> None:
    conn.execute(sa.delete(campaign_venues).where(campaign_venues.c.campaign_id == campaign_id))
    rows = [{"campaign_id": campaign_id, "venue_id": v} for v in sorted(set(venue_ids))]
    if rows:
        conn.execute(sa.insert(campaign_venues), rows)


def _inner_venues(targeting: TargetingRules | UnsetType | None) -> list[str] | UnsetType | None:
    """A patch's targeting.venue_ids as given; a null targeting clears every criterion: every venue."""
    if targeting is UNSET:
        return UNSET
    return None if targeting is None else targeting.venue_ids


def _one_venue_list(top: list[str] | None, inner: list[str] | UnsetType | None) -> None:
    if top is not None and inner is not UNSET:
        raise ApiError(
            400, "invalid_field", "give the venue list once: venue_ids or targeting.venue_ids", "venue_ids"
        )


def create_campaign(conn: sa.Connection, data: CampaignIn) -> Campaign:
    rules = CampaignRules.from_input(data)
    inner = UNSET if data.targeting is None else data.targeting.venue_ids
    _one_venue_list(data.venue_ids, inner)
    venue_ids = data.venue_ids if data.venue_ids is not None else (None if inner is UNSET else inner)
    _check_flight(data.start_at, data.end_at)
    rules.check(data.advertiser_id, _advertiser_category(conn, data.advertiser_id))
    result = conn.execute(
        sa.insert(campaigns).values(
            advertiser_id=data.advertiser_id,
            name=data.name,
            status=data.status,
            start_at=data.start_at,
            end_at=data.end_at,
            all_venues=venue_ids is None,
            created_at=int(time.time()),
            **rules.columns(),
        )
    )
    campaign_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    _set_venues(conn, campaign_id, venue_ids or ())
    return get_campaign(conn, campaign_id)


def update_campaign(conn: sa.Connection, campaign_id: int, patch: CampaignPatch) -> Campaign:
    row = conn.execute(sa.select(campaigns).where(campaigns.c.id == campaign_id)).mappings().first()
    if row is None:
        raise ApiError(404, "campaign_not_found", f"no campaign {campaign_id}", "campaign_id")
    rules = CampaignRules.from_row(row).patched(patch)
    inner = _inner_venues(patch.targeting)
    _one_venue_list(patch.venue_ids, inner)
    if patch.all_venues is not None and inner is not UNSET:
        raise ApiError(400, "invalid_field", "give all_venues or targeting.venue_ids, not both", "all_venues")
    values: dict[str, object] = {
        k: v for k in ("name", "status", "start_at", "end_at") if (v := getattr(patch, k)) is not None
    }
    start_at = patch.start_at if patch.start_at is not None else row["start_at"]
    _check_flight(start_at, patch.end_at if patch.end_at is not None else row["end_at"])
    rules.check(row["advertiser_id"], _advertiser_category(conn, row["advertiser_id"]))
    values |= rules.columns()
    venue_ids = patch.venue_ids if patch.venue_ids is not None else inner
    if isinstance(venue_ids, list):
        _set_venues(conn, campaign_id, venue_ids)
        values["all_venues"] = False
    elif venue_ids is None:  # targeting.venue_ids null: every venue; the list is kept, as with all_venues
        values["all_venues"] = True
    if patch.all_venues is not None:
        values["all_venues"] = patch.all_venues
    conn.execute(sa.update(campaigns).where(campaigns.c.id == campaign_id).values(**values))
    return get_campaign(conn, campaign_id)


def _creatives_by_campaign(conn: sa.Connection, campaign_ids: list[int]) -> dict[int, list[Creative]]:
    out: dict[int, list[Creative]] = {cid: [] for cid in campaign_ids}
    if not campaign_ids:
        return out
    rows = conn.execute(
        sa.select(creatives).where(creatives.c.campaign_id.in_(campaign_ids)).order_by(creatives.c.id)
    ).mappings()
    for r in rows:
        out[r["campaign_id"]].append(msgspec.convert(as_dict(r), Creative))
    return out


def _venues_by_campaign(conn: sa.Connection, campaign_ids: list[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {cid: [] for cid in campaign_ids}
    if not campaign_ids:
        return out
    rows = conn.execute(
        sa.select(campaign_venues)
        .where(campaign_venues.c.campaign_id.in_(campaign_ids))
        .order_by(campaign_venues.c.venue_id)
    )
    for r in rows:
        out[r.campaign_id].append(r.venue_id)
    return out


def _campaign(row: Mapping[Any, Any], venue_ids: list[str], items: list[Creative]) -> Campaign:
    """The wire view of a stored campaign: the same shape its create and patch bodies use."""
    rules = CampaignRules.from_row(row)
    stored = rules.rules
    all_venues = bool(row["all_venues"])
    targeting = stored.targeting or TargetingRules()
    return Campaign(
        id=row["id"],
        advertiser_id=row["advertiser_id"],
        name=row["name"],
        status=row["status"],
        start_at=row["start_at"],
        end_at=row["end_at"],
        all_venues=all_venues,
        venue_ids=venue_ids,
        creatives=items,
        created_at=row["created_at"],
        tier=rules.tier,
        weight=rules.weight,
        timezone=rules.timezone,
        targeting=msgspec.structs.replace(targeting, venue_ids=None if all_venues else venue_ids),
        exclusions=stored.exclusions or TargetingRules(venue_ids=None),
        dayparts=stored.dayparts,
        caps=[wire_cap(c) for c in stored.caps],
        cpm=None if rules.cpm_micros is None else amount(rules.cpm_micros),
        pacing=rules.pacing,
        frequency=stored.frequency,
        separation_minutes=rules.separation_minutes,
        share_of_voice=rules.share_of_voice,
    )


def list_campaigns(
    conn: sa.Connection, *, status: str | None = None, campaign_id: int | None = None
) -> list[Campaign]:
    query = sa.select(campaigns).order_by(campaigns.c.id)
    if status is not None:
        query = query.where(campaigns.c.status == status)
    if campaign_id is not None:
        query = query.where(campaigns.c.id == campaign_id)
    rows = [as_dict(r) for r in conn.execute(query).mappings()]
    ids = [r["id"] for r in rows]
    venues = _venues_by_campaign(conn, ids)
    items = _creatives_by_campaign(conn, ids)
    return [_campaign(r, venues[r["id"]], items[r["id"]]) for r in rows]


def get_campaign(conn: sa.Connection, campaign_id: int) -> Campaign:
    found = list_campaigns(conn, campaign_id=campaign_id)
    if not found:
        raise ApiError(404, "campaign_not_found", f"no campaign {campaign_id}", "campaign_id")
    return found[0]


def add_creative(conn: sa.Connection, campaign_id: int, data: CreativeIn) -> Creative:
    get_campaign(conn, campaign_id)
    now = int(time.time())
    values = msgspec.structs.asdict(data) | {
        "campaign_id": campaign_id,
        "status": "active",
        "created_at": now,
    }
    result = conn.execute(sa.insert(creatives).values(**values))
    return msgspec.convert(values | {"id": int(result.inserted_primary_key[0])}, Creative)  # type: ignore[index]


def update_creative(
    conn: sa.Connection, campaign_id: int, creative_id: int, patch: CreativePatch
) -> Creative:
    """Pause, resume, rename or reweigh one of the campaign's creatives."""
    get_campaign(conn, campaign_id)
    mine = sa.and_(creatives.c.id == creative_id, creatives.c.campaign_id == campaign_id)
    if conn.execute(sa.select(creatives.c.id).where(mine)).first() is None:
        raise ApiError(
            404, "creative_not_found", f"campaign {campaign_id} has no creative {creative_id}", "creative_id"
        )
    values = {k: v for k, v in msgspec.structs.asdict(patch).items() if v is not UNSET}
    if values:
        conn.execute(sa.update(creatives).where(mine).values(**values))
    row = conn.execute(sa.select(creatives).where(mine)).mappings().one()
    return msgspec.convert(as_dict(row), Creative)
