"""The delivery figures pages show, read through the reporting API's own query and repository."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from adslot.campaigns.schemas import Campaign
from adslot.console.pacing import Delivered, GoalProgress, progress
from adslot.environment import Environment
from adslot.reporting.query import parse_delivery
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
    """The API's delivery report over [start, end), whatever its length: the API refuses more than
    DELIVERY_MAX_DAYS at once, and the repository reads a longer range window by window to the same sums.

    Without a grouping it is grouped by venue, whose totals are the whole's with the ad requests counted
    (the API's default grouping, by campaign, has no request count to show)."""
    query = parse_delivery(
        start=str(start),
        end=str(max(end, start + 1)),
        group_by=",".join(group_by) or "venue",
        timezone=timezone,
        campaign_id=None if campaign_id is None else str(campaign_id),
        max_days=None,
    )
    return delivery_report(conn, query, now)


def hour_floor(epoch: int) -> int:
    return epoch - epoch % HOUR


def local_day(timezone: str, now: int) -> tuple[int, int]:
    """[start, end) of the day `now` is in, in the zone: the day a campaign's daily caps count in."""
    zone = zoneinfo.ZoneInfo(timezone)
    today = dt.datetime.fromtimestamp(now, zone).date()
    start = dt.datetime.combine(today, dt.time(), zone)
    end = dt.datetime.combine(today + dt.timedelta(days=1), dt.time(), zone)
    return int(start.timestamp()), int(end.timestamp())


def _delivered(rows: list[Any]) -> dict[int, Delivered]:
    return {r.campaign_id: Delivered(r.plays, r.impressions, r.fills) for r in rows}


@dataclass(frozen=True, slots=True)
class CampaignDelivery:
    """What a campaign delivered over its flight, and each of its goals."""

    flight: Delivered
    goals: list[GoalProgress]


async def campaign_delivery(env: Environment, found: list[Campaign], now: int) -> dict[int, CampaignDelivery]:
    """Each campaign's delivery over its flight and its goals: one report grouped by campaign over the
    flights' span, and one per time zone for the daily goals' day, however many campaigns."""
    if not found:
        return {}
    first = min(c.start_at for c in found)
    last = max(c.end_at for c in found)
    daily = [c for c in found if any(g.period != "lifetime" for g in c.caps)]
    days = {c.timezone: local_day(c.timezone, now) for c in daily}

    def read(conn: sa.Connection) -> tuple[dict[int, Delivered], dict[str, dict[int, Delivered]]]:
        # Play times ahead of now count too: an ad request is made before its slot plays.
        flights = delivery(conn, first, last, now, group_by=("campaign",))
        today = {
            zone: _delivered(delivery(conn, start, end, now, group_by=("campaign",)).rows)
            for zone, (start, end) in days.items()
        }
        return _delivered(flights.rows), today

    flights, today = await env.run_sync(read)
    out = {}
    for c in found:
        share = 0.0
        if c.timezone in days:
            start, end = days[c.timezone]
            share = (now - start) / (end - start)
        flight = flights.get(c.id, Delivered())
        goals = progress(c, flight, today.get(c.timezone, {}).get(c.id, Delivered()), now, share)
        out[c.id] = CampaignDelivery(flight, goals)
    return out
