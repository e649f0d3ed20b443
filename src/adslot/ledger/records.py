"""What the ledger stores and answers: ad requests, Proof-of-Play operations and their outcomes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

Event = Literal["impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]
Layer = Literal["wrapper", "inline"]
Outcome = Literal["issued", "counted", "duplicate", "echo", "late", "unknown"]

EVENT_COLUMNS: dict[str, str] = {
    "impression": "impression_at",
    "start": "start_at",
    "firstQuartile": "first_quartile_at",
    "midpoint": "midpoint_at",
    "thirdQuartile": "third_quartile_at",
    "complete": "complete_at",
}


@dataclass(frozen=True, slots=True)
class AdRequest:
    id: uuid.UUID
    account_id: int
    venue_id: str
    screen_id: str | None
    play_time: int
    created_at: int
    expires_at: int
    campaign_id: int
    creative_id: int
    impression_at: int | None = None
    start_at: int | None = None
    first_quartile_at: int | None = None
    midpoint_at: int | None = None
    third_quartile_at: int | None = None
    complete_at: int | None = None
    duplicate_count: int = 0
    late_count: int = 0
    impressions: float = 1.0
    claims: str | None = None
    settled_at: int | None = None
    settle_reason: str | None = None

    def state(self, now: int) -> str:
        """issued until its impression (played) or its expiry passes unplayed (expired)."""
        if self.impression_at is not None:
            return "played"
        return "expired" if now > self.expires_at else "issued"


@dataclass(frozen=True, slots=True)
class Issue:
    record: AdRequest


@dataclass(frozen=True, slots=True)
class Fire:
    """A pixel fire as received; the store decides, under its write lock, what it counts as."""

    ad_request_id: uuid.UUID
    event: str
    layer: str
    at: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an operation came to, with the ad request's expiry (None when it is unknown)."""

    outcome: Outcome
    expires_at: int | None = None


Operation = Issue | Fire

COLUMNS = (
    "id",
    "account_id",
    "venue_id",
    "screen_id",
    "play_time",
    "created_at",
    "expires_at",
    "campaign_id",
    "creative_id",
    "impression_at",
    "start_at",
    "first_quartile_at",
    "midpoint_at",
    "third_quartile_at",
    "complete_at",
    "duplicate_count",
    "late_count",
)
ISSUE_COLUMNS = COLUMNS[:9]
