"""The in-memory snapshot of what the hot path reads: keys, venues and the decision index.

It is rebuilt off the hot path whenever the environment's catalog version changes; every write to keys,
venues or campaigns bumps that version in the same transaction, so all worker processes converge within one
poll interval without a query per request.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from adslot.auth.keys import KeyRecord
from adslot.auth.repository import active_keys
from adslot.campaigns.repository import list_campaigns
from adslot.decision.index import Creative, DecisionIndex, LiveCampaign
from adslot.inventory.repository import venue_ids
from adslot.storage.tables import creatives, environment_meta

VERSION_KEY = "catalog_version"


@dataclass(frozen=True, slots=True)
class Catalog:
    version: int
    keys: dict[str, KeyRecord]
    venues: frozenset[str]
    index: DecisionIndex
    creatives: dict[int, Creative]
    """Every creative ever defined, live or not: an issued ad request still renders after a pause."""


def current_version(conn: sa.Connection) -> int:
    row = conn.execute(
        sa.select(environment_meta.c.value).where(environment_meta.c.name == VERSION_KEY)
    ).first()
    return int(row[0]) if row else 0


def bump_version(conn: sa.Connection) -> None:
    """Mark the catalog changed; call inside the transaction that changed it."""
    updated = conn.execute(
        sa.update(environment_meta)
        .where(environment_meta.c.name == VERSION_KEY)
        .values(value=sa.cast(sa.cast(environment_meta.c.value, sa.Integer) + 1, sa.String))
    )
    if updated.rowcount == 0:
        conn.execute(sa.insert(environment_meta).values(name=VERSION_KEY, value="1"))


def load_catalog(conn: sa.Connection) -> Catalog:
    version = current_version(conn)
    every_creative = _all_creatives(conn)
    live = [
        LiveCampaign(
            id=c.id,
            advertiser_id=c.advertiser_id,
            name=c.name,
            start_at=c.start_at,
            end_at=c.end_at,
            all_venues=c.all_venues,
            venue_ids=frozenset(c.venue_ids),
            creatives=tuple(every_creative[cr.id] for cr in c.creatives if cr.status == "active"),
        )
        for c in list_campaigns(conn, status="active")
    ]
    return Catalog(
        version=version,
        keys=active_keys(conn),
        venues=venue_ids(conn),
        index=DecisionIndex.build(live),
        creatives=every_creative,
    )


def _all_creatives(conn: sa.Connection) -> dict[int, Creative]:
    return {
        r.id: Creative(
            id=r.id,
            campaign_id=r.campaign_id,
            name=r.name,
            media_url=r.media_url,
            mime_type=r.mime_type,
            width=r.width,
            height=r.height,
            duration_seconds=r.duration_seconds,
            bitrate_kbps=r.bitrate_kbps,
        )
        for r in conn.execute(sa.select(creatives))
    }


def get_meta(conn: sa.Connection, name: str) -> str | None:
    row = conn.execute(sa.select(environment_meta.c.value).where(environment_meta.c.name == name)).first()
    return str(row[0]) if row else None


def set_meta(conn: sa.Connection, name: str, value: str) -> None:
    if get_meta(conn, name) is None:
        conn.execute(sa.insert(environment_meta).values(name=name, value=value))
    else:
        conn.execute(sa.update(environment_meta).where(environment_meta.c.name == name).values(value=value))
