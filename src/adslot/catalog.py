"""The in-memory snapshot of what the hot path reads: keys, venues, screens and the decision index.

It is rebuilt off the hot path whenever the environment's catalog version changes; every write to keys,
venues or campaigns bumps that version in the same transaction, so all worker processes converge within one
poll interval without a query per request. The version only grows. The keys are swapped in ahead of the rest
(Environment._poll_catalog), and a key the snapshot lacks is looked up before it is refused (auth/lookup.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlalchemy as sa

from adslot.auth.keys import KeyRecord
from adslot.auth.repository import active_keys
from adslot.campaigns.live import all_creatives, live_campaigns
from adslot.decision.index import DecisionIndex
from adslot.decision.model import Creative, ScreenProfile, VenueProfile
from adslot.demand.creatives import CreativeStatus
from adslot.demand.creatives_repository import creative_statuses
from adslot.demand.partners import Partner
from adslot.demand.repository import active_partners
from adslot.inventory.repository import screen_profiles, venue_profiles
from adslot.storage.tables import environment_meta
from adslot.vast.inline import InlineCreative

VERSION_KEY = "catalog_version"


@dataclass(frozen=True, slots=True)
class Catalog:
    version: int
    keys: dict[str, KeyRecord]
    """The active keys by SHA-256 hash; the worker adds those it looks up (auth/lookup.py)."""
    venues: dict[str, VenueProfile]
    """Every registered venue by id (`venue_id in catalog.venues` asks whether it is registered)."""
    screens: dict[tuple[str, str], ScreenProfile]
    """Every registered screen by (venue_id, screen_id)."""
    index: DecisionIndex
    """The active campaigns, compiled (`index.campaigns` by id), ready for decisions."""
    creatives: dict[int, Creative]
    """Every creative ever defined, live or not: an issued ad request still renders after a pause."""
    partners: tuple[Partner, ...] = ()
    """The active demand partners (demand/): none, and an ad request asks no one and costs nothing more."""
    partner_headers: dict[str, tuple[str, str]] = field(default_factory=dict, repr=False)
    """The credential header (name, value) of each active partner that has one, sent with its bid requests
    only: never shown, never logged (so not in this snapshot's repr either)."""
    demand_creatives: dict[tuple[str, str], tuple[int, CreativeStatus]] = field(default_factory=dict)
    """(partner name, crid) -> (id, approval status) of every creative partners have bid."""
    inline: dict[int, InlineCreative] = field(default_factory=dict, compare=False)
    """Each creative as the inline VAST renders it, made at its first fetch: it lives and dies with this
    snapshot, so a changed creative is rendered anew after the next reload."""


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
    """The whole snapshot in a fixed number of queries, however many campaigns and venues there are."""
    version = current_version(conn)
    every_creative, active_creatives = all_creatives(conn)
    partners, headers = active_partners(conn)
    return Catalog(
        version=version,
        keys=active_keys(conn),
        venues=venue_profiles(conn),
        screens=screen_profiles(conn),
        index=DecisionIndex.build(live_campaigns(conn, active_creatives)),
        creatives=every_creative,
        partners=partners,
        partner_headers=headers,
        demand_creatives=creative_statuses(conn),
    )


def get_meta(conn: sa.Connection, name: str) -> str | None:
    row = conn.execute(sa.select(environment_meta.c.value).where(environment_meta.c.name == name)).first()
    return str(row[0]) if row else None


def set_meta(conn: sa.Connection, name: str, value: str) -> None:
    if get_meta(conn, name) is None:
        conn.execute(sa.insert(environment_meta).values(name=name, value=value))
    else:
        conn.execute(sa.update(environment_meta).where(environment_meta.c.name == name).values(value=value))
