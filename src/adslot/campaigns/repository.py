"""Advertisers, campaigns and creatives in the environment's database."""

from __future__ import annotations

import time
from collections.abc import Iterable

import msgspec
import sqlalchemy as sa

from adslot.campaigns.schemas import (
    Advertiser,
    AdvertiserIn,
    Campaign,
    CampaignIn,
    CampaignPatch,
    Creative,
    CreativeIn,
)
from adslot.errors import ApiError
from adslot.storage.database import as_dict
from adslot.storage.tables import advertisers, campaign_venues, campaigns, creatives


def _check_flight(start_at: int, end_at: int) -> None:
    if end_at <= start_at:
        raise ApiError(422, "invalid_flight", "end_at must be after start_at", "end_at")


def create_advertiser(conn: sa.Connection, data: AdvertiserIn) -> Advertiser:
    exists = conn.execute(sa.select(advertisers.c.id).where(advertisers.c.name == data.name)).first()
    if exists:
        raise ApiError(409, "advertiser_exists", f"an advertiser named {data.name!r} exists", "name")
    now = int(time.time())
    result = conn.execute(
        sa.insert(advertisers).values(name=data.name, category=data.category, created_at=now)
    )
    return Advertiser(int(result.inserted_primary_key[0]), data.name, data.category, now)  # type: ignore[index]


def list_advertisers(conn: sa.Connection) -> list[Advertiser]:
    rows = conn.execute(sa.select(advertisers).order_by(advertisers.c.id)).mappings()
    return [msgspec.convert(as_dict(r), Advertiser) for r in rows]


def _set_venues(conn: sa.Connection, campaign_id: int, venue_ids: Iterable[str]) -> None:
    conn.execute(sa.delete(campaign_venues).where(campaign_venues.c.campaign_id == campaign_id))
    rows = [{"campaign_id": campaign_id, "venue_id": v} for v in sorted(set(venue_ids))]
    if rows:
        conn.execute(sa.insert(campaign_venues), rows)


def create_campaign(conn: sa.Connection, data: CampaignIn) -> Campaign:
    _check_flight(data.start_at, data.end_at)
    if not conn.execute(sa.select(advertisers.c.id).where(advertisers.c.id == data.advertiser_id)).first():
        raise ApiError(422, "unknown_advertiser", f"no advertiser {data.advertiser_id}", "advertiser_id")
    result = conn.execute(
        sa.insert(campaigns).values(
            advertiser_id=data.advertiser_id,
            name=data.name,
            status=data.status,
            start_at=data.start_at,
            end_at=data.end_at,
            all_venues=data.venue_ids is None,
            created_at=int(time.time()),
        )
    )
    campaign_id = int(result.inserted_primary_key[0])  # type: ignore[index]
    _set_venues(conn, campaign_id, data.venue_ids or ())
    return get_campaign(conn, campaign_id)


def update_campaign(conn: sa.Connection, campaign_id: int, patch: CampaignPatch) -> Campaign:
    current = get_campaign(conn, campaign_id)
    values: dict[str, object] = {
        k: v for k in ("name", "status", "start_at", "end_at") if (v := getattr(patch, k)) is not None
    }
    _check_flight(int(values.get("start_at", current.start_at)), int(values.get("end_at", current.end_at)))  # type: ignore[call-overload]
    if patch.venue_ids is not None:
        _set_venues(conn, campaign_id, patch.venue_ids)
        values["all_venues"] = False
    if patch.all_venues is not None:
        values["all_venues"] = patch.all_venues
    if values:
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
    return [
        Campaign(
            id=r["id"],
            advertiser_id=r["advertiser_id"],
            name=r["name"],
            status=r["status"],
            start_at=r["start_at"],
            end_at=r["end_at"],
            all_venues=bool(r["all_venues"]),
            venue_ids=venues[r["id"]],
            creatives=items[r["id"]],
            created_at=r["created_at"],
        )
        for r in rows
    ]


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
