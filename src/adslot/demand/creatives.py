"""Creative approval: a creative (OpenRTB `crid`) a partner bids for the first time is held for the media
owner's approval, and plays only once approved; a rejected one never plays again.

The screens are in public places, so the media owner, not the buyer, has the last word on what they show.
The markup first seen is kept, so what is previewed is what was bid. These are the wire shapes and the pure
rules; `creatives_repository` keeps the queue in the environment's database.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from adslot.errors import ApiError

CreativeStatus = Literal["pending", "approved", "rejected"]
"""pending: seen, waiting for the media owner; approved: may play; rejected: never plays, whatever it bids."""
CREATIVE_STATUSES: tuple[CreativeStatus, ...] = ("pending", "approved", "rejected")
Decision = Literal["approved", "rejected"]

MAX_CRID_LENGTH = 256
"""A crid is the buyer's id of its creative; one longer than its column cannot be held for approval."""
MAX_NURL_LENGTH = 2048
"""As a partner's endpoint: a longer URL cannot be stored, so its creative cannot be previewed."""
PREVIEW_PATH = "/api/v1/demand/creatives/{id}/preview"
"""Relative to the environment's base URL, as every URL adslot answers."""


class DemandCreative(msgspec.Struct):
    """A creative as the API and the CLI show it. `adm` itself is not listed (up to 256 KiB each): the
    preview URL answers it."""

    id: int
    partner: str
    """The name of the partner that bid it."""
    crid: str
    adomain: list[str] | None
    """The advertiser's domains, as first bid."""
    nurl: str | None
    """The URL that served its VAST, when the bid had no `adm`: adslot stores no markup for it."""
    has_markup: bool
    """Whether the VAST markup first seen is stored, and so whether `preview_url` answers it."""
    status: CreativeStatus
    first_seen_at: int
    decided_at: int | None
    decided_by: str | None
    """Who approved or rejected it, as the audit log names them."""
    preview_url: str
    """Answers the stored VAST (admin key), for any VAST player or inspector."""


def preview_url(base_url: str, creative_id: int) -> str:
    """Absolute, from the environment's public base URL, so it can be opened from the answer as it is."""
    return base_url + PREVIEW_PATH.format(id=creative_id)


def first_status(auto_approve: bool) -> CreativeStatus:
    """The status of a creative seen for the first time: a partner the media owner trusts (`auto_approve`)
    plays at once; any other waits for a decision."""
    return "approved" if auto_approve else "pending"


def reviewable(crid: str | None, adm: str | None, nurl: str | None) -> bool:
    """Whether a bid's creative can be held for approval at all: it needs a crid to be recognised by next
    time, and its markup or the URL serving it to be previewed. One that cannot is never played."""
    if not crid or len(crid) > MAX_CRID_LENGTH:
        return False
    if adm:
        return True
    return bool(nurl) and len(nurl or "") <= MAX_NURL_LENGTH


def stored_markup(adm: str | None, nurl: str | None) -> tuple[str | None, str | None]:
    """What is kept of a bid's markup: its `adm` when it has one (its `nurl` is then only a win notice,
    full of macros, and not worth keeping), else the `nurl` that serves the VAST."""
    return (adm, None) if adm else (None, nurl)


def playable(status: CreativeStatus) -> bool:
    """Only an approved creative plays: pending ones wait for the media owner, rejected ones never play."""
    return status == "approved"


def decided(current: CreativeStatus, decision: Decision, creative_id: int) -> bool:
    """Whether `decision` changes a creative in `current`: approving twice, or rejecting twice, changes
    nothing (a retried command is harmless). A rejection is final (409 `creative_rejected`): the media owner
    said this must never play, and one approval click should not undo that; an approved creative can still be
    rejected."""
    if current == decision:
        return False
    if current == "rejected":
        raise ApiError(
            409,
            "creative_rejected",
            f"demand creative {creative_id} was rejected; a rejection is final",
            "id",
        )
    return True


def checked_status(value: str | None, field: str = "status") -> CreativeStatus | None:
    """A status filter from a query string or the command line; anything else is 400 invalid_field."""
    if value is None:
        return None
    for status in CREATIVE_STATUSES:
        if value == status:
            return status
    raise ApiError(400, "invalid_field", f"{value!r} is not one of {', '.join(CREATIVE_STATUSES)}", field)
