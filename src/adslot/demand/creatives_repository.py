"""The approval queue of demand creatives, in the environment's own database (the sandbox's and production's
never meet, as their partners do not).

`note_creative` is what the auction is to call for each valid bid: it answers the creative's status, and
holds a creative never seen from that partner for approval. The rest is the media owner's side: list the
queue, approve, reject. Every creative answered carries an absolute `preview_url`, so each function that
answers one takes the environment's public base URL.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import sqlalchemy as sa

from adslot.demand.creatives import (
    CreativeStatus,
    Decision,
    DemandCreative,
    decided,
    first_status,
    preview_url,
    reviewable,
    stored_markup,
)
from adslot.demand.partners import Partner
from adslot.errors import ApiError
from adslot.fields import MAX_ID
from adslot.storage.database import is_unique_violation
from adslot.storage.tables import demand_creatives, demand_partners

_ADOMAIN = msgspec.json.Decoder(list[str] | None)
MAX_ACTOR_LENGTH = 128
"""decided_by's column; the audit log keeps the actor whole."""


def _not_found(creative_id: int) -> ApiError:
    return ApiError(404, "creative_not_found", f"no demand creative {creative_id}", "id")


def _creative(row: Mapping[Any, Any], base_url: str) -> DemandCreative:
    return DemandCreative(
        id=row["id"],
        partner=row["partner"],
        crid=row["crid"],
        adomain=_ADOMAIN.decode(row["adomain"]) if row["adomain"] is not None else None,
        nurl=row["nurl"],
        has_markup=bool(row["has_markup"]),
        status=row["status"],
        first_seen_at=row["first_seen_at"],
        decided_at=row["decided_at"],
        decided_by=row["decided_by"],
        preview_url=preview_url(base_url, row["id"]),
    )


def _listed() -> sa.Select[Any]:
    """Every member but the markup itself (up to 256 KiB each): a queue is read often, a preview rarely."""
    c = demand_creatives.c
    return sa.select(
        c.id,
        demand_partners.c.name.label("partner"),
        c.crid,
        c.adomain,
        c.nurl,
        c.adm.is_not(None).label("has_markup"),
        c.status,
        c.first_seen_at,
        c.decided_at,
        c.decided_by,
    ).join(demand_partners, demand_partners.c.id == c.partner_id)


def _status_of(conn: sa.Connection, partner_id: int, crid: str) -> CreativeStatus | None:
    c = demand_creatives.c
    query = sa.select(c.status).where(c.partner_id == partner_id, c.crid == crid)
    status: CreativeStatus | None = conn.execute(query).scalar()
    return status


def note_creative(
    conn: sa.Connection,
    partner: Partner,
    crid: str | None,
    adomain: Sequence[str] | None,
    adm: str | None,
    nurl: str | None,
    now: int,
) -> CreativeStatus:
    """The status of the partner's creative `crid`, for the auction to play only an approved one.

    A crid never seen from this partner is stored with its markup: pending, or approved at once if the
    partner is auto-approved. A known one keeps its status (and the markup first seen). A creative that
    cannot be held for approval (no crid, one too long, no markup to preview) is answered rejected and
    stored nowhere: it could never be approved, so it never plays.

    Two workers noting the same new crid at once both succeed with one row: the loser of the insert hits the
    unique (partner_id, crid) in a savepoint, and reads the winner's row, which on PostgreSQL's READ
    COMMITTED its insert waited for (on SQLite, writers take turns, so the read before the insert sees it).
    """
    if crid is None or not reviewable(crid, adm, nurl):
        return "rejected"
    known = _status_of(conn, partner.id, crid)
    if known is not None:
        return known
    kept_adm, kept_nurl = stored_markup(adm, nurl)
    status = first_status(partner.auto_approve)
    values = {
        "partner_id": partner.id,
        "crid": crid,
        "adomain": msgspec.json.encode(list(adomain)).decode() if adomain is not None else None,
        "adm": kept_adm,
        "nurl": kept_nurl,
        "status": status,
        "first_seen_at": now,
        "decided_at": now if status == "approved" else None,
        "decided_by": "auto-approve" if status == "approved" else None,
    }
    try:
        with conn.begin_nested():  # PostgreSQL aborts a transaction a statement failed in; a savepoint not
            conn.execute(sa.insert(demand_creatives).values(**values))
    except sa.exc.IntegrityError as exc:
        if not is_unique_violation(exc):  # the partner was removed meanwhile: its bids are no one's
            raise ApiError(404, "partner_not_found", f"no demand partner {partner.name!r}", "name") from exc
        known = _status_of(conn, partner.id, crid)
        if known is None:
            raise
        return known
    return status


def creative_statuses(conn: sa.Connection) -> dict[tuple[str, str], tuple[int, CreativeStatus]]:
    """(partner name, crid) -> (id, status) of every creative, for the catalog the auction reads."""
    rows = conn.execute(
        sa.select(
            demand_partners.c.name, demand_creatives.c.crid, demand_creatives.c.id, demand_creatives.c.status
        ).join(demand_partners, demand_partners.c.id == demand_creatives.c.partner_id)
    )
    return {(name, crid): (ident, status) for name, crid, ident, status in rows}


def list_creatives(
    conn: sa.Connection,
    status: CreativeStatus | None = None,
    partner: str | None = None,
    *,
    base_url: str,
) -> list[DemandCreative]:
    """The queue, oldest first (the order they were first seen); `partner` must name a partner (a typo
    would show an empty queue and hide the creatives waiting)."""
    query = _listed().order_by(demand_creatives.c.id)
    if status is not None:
        query = query.where(demand_creatives.c.status == status)
    if partner is not None:
        found = conn.execute(sa.select(demand_partners.c.id).where(demand_partners.c.name == partner)).first()
        if found is None:
            raise ApiError(404, "partner_not_found", f"no demand partner {partner!r}", "partner")
        query = query.where(demand_creatives.c.partner_id == found.id)
    return [_creative(row, base_url) for row in conn.execute(query).mappings()]


def get_creative(conn: sa.Connection, creative_id: int, *, base_url: str) -> DemandCreative:
    if not 1 <= creative_id <= MAX_ID:  # no such id is stored, and PostgreSQL would refuse it as an integer
        raise _not_found(creative_id)
    row = conn.execute(_listed().where(demand_creatives.c.id == creative_id)).mappings().first()
    if row is None:
        raise _not_found(creative_id)
    return _creative(row, base_url)


def markup(conn: sa.Connection, creative_id: int) -> str:
    """The VAST first bid with the creative, for the preview; 409 no_stored_markup for a creative whose VAST
    came by its nurl (adslot never fetches it: the partner would count that as a win)."""
    get_creative(conn, creative_id, base_url="")
    row = conn.execute(
        sa.select(demand_creatives.c.adm, demand_creatives.c.nurl).where(demand_creatives.c.id == creative_id)
    ).one()
    if row.adm is None:
        raise ApiError(
            409,
            "no_stored_markup",
            f"demand creative {creative_id} was bid with no adm; its VAST is served by its nurl {row.nurl}",
            "id",
        )
    adm: str = row.adm
    return adm


def _decide(
    conn: sa.Connection, creative_id: int, decision: Decision, actor: str, base_url: str
) -> DemandCreative:
    """Apply the decision if the rules let it change the creative. The update names the status it read,
    so a concurrent decision committed in between (PostgreSQL re-checks the row it waited for) makes it
    change nothing, and the rules are applied again to what that one left: a rejection stays final."""
    current = get_creative(conn, creative_id, base_url=base_url)
    if not decided(current.status, decision, creative_id):
        return current
    changed = conn.execute(
        sa.update(demand_creatives)
        .where(demand_creatives.c.id == creative_id, demand_creatives.c.status == current.status)
        .values(status=decision, decided_at=int(time.time()), decided_by=actor[:MAX_ACTOR_LENGTH])
    )
    if changed.rowcount == 0:
        return _decide(conn, creative_id, decision, actor, base_url)
    return get_creative(conn, creative_id, base_url=base_url)


def approve(conn: sa.Connection, creative_id: int, actor: str, *, base_url: str) -> DemandCreative:
    """Let the creative play. Approving an approved one changes nothing (not even who decided); a rejected
    one stays rejected (409 creative_rejected)."""
    return _decide(conn, creative_id, "approved", actor, base_url)


def reject(conn: sa.Connection, creative_id: int, actor: str, *, base_url: str) -> DemandCreative:
    """Never play the creative again, whatever its partner bids; final. An approved creative may be
    rejected (the media owner changed their mind); rejecting twice changes nothing."""
    return _decide(conn, creative_id, "rejected", actor, base_url)
