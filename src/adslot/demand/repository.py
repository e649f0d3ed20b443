"""Demand partners in the environment's own database: the sandbox's and production's never meet, so a sandbox
partner can never be asked about production traffic.

The floor is stored in micros (as a campaign's cpm is) and the venue list as JSON text, null for every venue;
this module is the one place that converts them, for the API, the CLI and, later, the bidders.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import msgspec
import sqlalchemy as sa
from msgspec import UNSET

from adslot.campaigns.rules import amount, micros
from adslot.demand.partners import (
    DealIn,
    Partner,
    PartnerIn,
    PartnerPatch,
    PartnerStatus,
    checked_auth_header,
    checked_currency,
    checked_endpoint,
    checked_notice_hosts,
)
from adslot.errors import ApiError
from adslot.storage.database import conflict_as
from adslot.storage.tables import demand_creatives, demand_partners, venues

_VENUES = msgspec.json.Decoder(list[str] | None)
_DEALS = msgspec.json.Decoder(list[DealIn])
_DOMAINS = msgspec.json.Decoder(list[str])


def _not_found(name: str) -> ApiError:
    return ApiError(404, "partner_not_found", f"no demand partner {name!r}", "name")


def _venue_list(conn: sa.Connection, venue_ids: list[str] | None) -> str | None:
    """The venues as stored (sorted, each once), once every one is known: a typo would silently keep the
    partner from a venue it was meant to bid on. 422 unknown_venue names the first unknown one."""
    if venue_ids is None:
        return None
    wanted = sorted(set(venue_ids))
    known = set(conn.execute(sa.select(venues.c.venue_id).where(venues.c.venue_id.in_(wanted))).scalars())
    for index, venue_id in enumerate(venue_ids):
        if venue_id not in known:
            raise ApiError(422, "unknown_venue", f"no venue {venue_id!r}", f"venues[{index}]")
    return msgspec.json.encode(wanted).decode()


def _stored(conn: sa.Connection, given: dict[str, Any]) -> dict[str, Any]:
    """Column values from wire values, each checked (400 shape first, then 422 against the database)."""
    values = dict(given)
    if "endpoint" in values:
        checked_endpoint(values["endpoint"])
    if "currency" in values:
        checked_currency(values["currency"])
    if "floor_cpm" in values:
        values["floor_cpm_micros"] = micros(values.pop("floor_cpm"), "floor_cpm")
    if "venues" in values:
        values["venues"] = _venue_list(conn, values["venues"])
    if "deals" in values:
        values["deals"] = _deal_list(values["deals"])
    if "blocked_domains" in values:
        domains = sorted({domain.lower().rstrip(".") for domain in values["blocked_domains"]})
        values["blocked_domains"] = msgspec.json.encode(domains).decode() if domains else None
    if "notice_hosts" in values:
        hosts = checked_notice_hosts(values["notice_hosts"])
        values["notice_hosts"] = msgspec.json.encode(hosts).decode() if hosts else None
    if "auth_header" in values:
        header = values.pop("auth_header")
        if header is not None:
            checked_auth_header(header)
        values["auth_header_name"] = header.name if header is not None else None
        values["auth_header_value"] = header.value if header is not None else None
    return values


def _deal_list(deals: list[DealIn]) -> str | None:
    """The deals as stored (JSON), each id once and each floor in whole micros; none is null."""
    seen: set[str] = set()
    for index, deal in enumerate(deals):
        if deal.id in seen:
            raise ApiError(400, "invalid_field", f"deal {deal.id!r} is given twice", f"deals[{index}].id")
        seen.add(deal.id)
        micros(deal.floor_cpm, f"deals[{index}].floor_cpm")
    return msgspec.json.encode(deals).decode() if deals else None


def _partner(row: Mapping[Any, Any]) -> Partner:
    return Partner(
        id=row["id"],
        name=row["name"],
        endpoint=row["endpoint"],
        timeout_ms=row["timeout_ms"],
        floor_cpm=amount(row["floor_cpm_micros"]),
        currency=row["currency"],
        auction=row["auction"],
        max_qps=row["max_qps"],
        venues=_VENUES.decode(row["venues"]) if row["venues"] is not None else None,
        auto_approve=bool(row["auto_approve"]),
        status=row["status"],
        created_at=row["created_at"],
        deals=_DEALS.decode(row["deals"]) if row["deals"] else [],
        blocked_domains=_DOMAINS.decode(row["blocked_domains"]) if row["blocked_domains"] else [],
        notice_hosts=_DOMAINS.decode(row["notice_hosts"]) if row["notice_hosts"] else [],
        auth_header=row["auth_header_name"],
    )


def create_partner(conn: sa.Connection, data: PartnerIn) -> Partner:
    conflict = ApiError(409, "partner_exists", f"a demand partner named {data.name!r} exists", "name")
    if conn.execute(sa.select(demand_partners.c.id).where(demand_partners.c.name == data.name)).first():
        raise conflict
    values = _stored(conn, msgspec.structs.asdict(data))
    with conflict_as(conflict):  # a concurrent create of the same name, between the read and this insert
        conn.execute(sa.insert(demand_partners).values(**values, created_at=int(time.time())))
    return get_partner(conn, data.name)


def list_partners(conn: sa.Connection, *, status: PartnerStatus | None = None) -> list[Partner]:
    query = sa.select(demand_partners).order_by(demand_partners.c.name)
    if status is not None:
        query = query.where(demand_partners.c.status == status)
    return [_partner(row) for row in conn.execute(query).mappings()]


def active_partners(conn: sa.Connection) -> tuple[tuple[Partner, ...], dict[str, tuple[str, str]]]:
    """The active partners, and the credential header (name, value) of each that has one by partner name:
    what the bid requests to its endpoint carry. One query (the catalog's count of queries stays fixed); the
    headers are kept apart from `Partner`, which is shown and audited."""
    query = (
        sa.select(demand_partners)
        .where(demand_partners.c.status == "active")
        .order_by(demand_partners.c.name)
    )
    partners: list[Partner] = []
    headers: dict[str, tuple[str, str]] = {}
    for row in conn.execute(query).mappings():
        partners.append(_partner(row))
        if row["auth_header_name"] is not None and row["auth_header_value"] is not None:
            headers[row["name"]] = (row["auth_header_name"], row["auth_header_value"])
    return tuple(partners), headers


def get_partner(conn: sa.Connection, name: str) -> Partner:
    row = conn.execute(sa.select(demand_partners).where(demand_partners.c.name == name)).mappings().first()
    if row is None:
        raise _not_found(name)
    return _partner(row)


def update_partner(conn: sa.Connection, name: str, patch: PartnerPatch) -> Partner:
    """Change the members the patch gives; pausing and resuming are patches of `status`."""
    get_partner(conn, name)
    values = _stored(conn, {k: v for k, v in msgspec.structs.asdict(patch).items() if v is not UNSET})
    if values:
        conn.execute(sa.update(demand_partners).where(demand_partners.c.name == name).values(**values))
    return get_partner(conn, name)


def set_status(conn: sa.Connection, name: str, status: PartnerStatus) -> Partner:
    return update_partner(conn, name, PartnerPatch(status=status))


def remove_partner(conn: sa.Connection, name: str) -> Partner:
    """Delete the partner, and its creatives with it, and answer it as it was; its name is free again (a new
    partner of that name starts with an empty approval queue: approvals were of the old one's bids)."""
    removed = get_partner(conn, name)
    conn.execute(sa.delete(demand_creatives).where(demand_creatives.c.partner_id == removed.id))
    conn.execute(sa.delete(demand_partners).where(demand_partners.c.name == name))
    return removed
