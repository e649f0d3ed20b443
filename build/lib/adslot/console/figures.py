"""The delivery figures pages show, read through the reporting API's own query and repository."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from adslot.campaigns.schemas import Campaign
from adslot.console.pacing import Delivered, GoalProgress, progress
from adslot.environment import Environment
from adslot.reporting.query import DELIVERY_MAX_DAYS, parse_delivery
from adslot.reporting.repository import delivery_report
from adslot.reporting.schemas import DeliveryReport

HOUR = 3600
DAY = 86_400


def delivery(
    conn: sa.Connection,
    start: int,
    end: int,
    now: int,
    *,
    group_by: tuple[str, ...] = (),
    campaign_id: int | None = None,
    timezone: str = "UTC",
) -> DeliveryReport:
    """The delivery report over [start, end), shortened to its last DELIVERY_MAX_DAYS days if longer.

    Without a grouping it is grouped by venue, whose totals are the whole's with the ad requests counted
    (the API's default grouping, by campaign, has no request count to show)."""
    start = max(start, end - DELIVERY_MAX_DAYS * DAY)
    query = parse_delivery(
        start=str(start),
        end=str(max(end, start + 1)),
        group_by=",".join(group_by) or "venue",
        timezone=timezone,
        campaign_id=None if campaign_id is None else str(campaign_id),
    )
    return delivery_report(conn, query, now)


def hour_floor(epoch: int) -> int:
    return epoch - epoch % HOUR


def _delivered(rows: list[Any]) -> dict[int, Delivered]:
    return {r.campaign_id: Delivered(r.plays, r.impressions) for r in rows}


async def goal_progress(env: Environment, found: list[Campaign], now: int) -> dict[int, list[GoalProgress]]:
    """Each campaign's goals with what it delivered over its flight and today (UTC), in two reports."""
    if not found:
        return {}
    first = min(c.start_at for c in found)
    today_start = now - now % DAY

    def read(conn: sa.Connection) -> tuple[dict[int, Delivered], dict[int, Delivered]]:
        # Play times ahead of now count too: an ad request is made before its slot plays.
        lifetime = delivery(conn, first, now + DAY, now, group_by=("campaign",))
        today = delivery(conn, today_start, today_start + DAY, now, group_by=("campaign",))
        return _delivered(lifetime.rows), _delivered(today.rows)

    lifetime, today = await env.run_sync(read)
    share = (now - today_start) / DAY
    return {
        c.id: progress(c, lifetime.get(c.id, Delivered()), today.get(c.id, Delivered()), now, share)
        for c in found
    }
