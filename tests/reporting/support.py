"""Ledger rows written directly, for report tests that need exact, known data (past play times, settled
and released ad requests, request counts)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from adslot.storage.tables import ad_requests, key_stats, request_stats


def utc(text: str) -> int:
    """UTC epoch seconds of an ISO 8601 time without offset, e.g. "2026-10-25T01:00"."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def ad_request(play_time: int, **values: Any) -> dict[str, Any]:
    """One ad_requests row: filled, unplayed, expiring 15 minutes after play_time, unless told otherwise."""
    return {
        "id": uuid.uuid4(),
        "account_id": 1,
        "venue_id": "v1",
        "screen_id": None,
        "play_time": play_time,
        "created_at": play_time - 60,
        "expires_at": play_time + 900,
        "campaign_id": 1,
        "creative_id": 10,
        "impression_at": None,
        "start_at": None,
        "first_quartile_at": None,
        "midpoint_at": None,
        "third_quartile_at": None,
        "complete_at": None,
        "duplicate_count": 0,
        "late_count": 0,
        "impressions": 1.0,
        "settled_at": None,
        "settle_reason": None,
        "key_id": None,
        **values,
    }


def played(play_time: int, *events: str, **values: Any) -> dict[str, Any]:
    """A played ad request (impression counted) with each named event (start, first_quartile, midpoint,
    third_quartile, complete) counted at play_time too."""
    times = {f"{event}_at": play_time for event in events}
    return ad_request(play_time, impression_at=play_time, **times, **values)


def stat(venue_id: str, hour: int, requests: int, screen_id: str = "", fills: int = 0) -> dict[str, Any]:
    return {"venue_id": venue_id, "screen_id": screen_id, "hour": hour, "requests": requests, "fills": fills}


def key_stat(key_id: int, hour: int, requests: int, fills: int = 0) -> dict[str, Any]:
    return {"key_id": key_id, "hour": hour, "requests": requests, "fills": fills}


def insert(
    engine: sa.Engine,
    rows: Sequence[dict[str, Any]],
    stats: Sequence[dict[str, Any]] = (),
    by_key: Sequence[dict[str, Any]] = (),
) -> None:
    """Ad requests, request_stats rows and key_stats rows (`by_key`), in one transaction."""
    with engine.begin() as conn:
        if rows:
            conn.execute(sa.insert(ad_requests), list(rows))
        if stats:
            conn.execute(sa.insert(request_stats), list(stats))
        if by_key:
            conn.execute(sa.insert(key_stats), list(by_key))
