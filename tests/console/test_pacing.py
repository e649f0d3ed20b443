"""Goals against delivery: lifetime goals are due evenly over the flight, daily ones over the day."""

from __future__ import annotations

import msgspec

from adslot.campaigns.schemas import Campaign
from adslot.console.pacing import Delivered, plan_line, progress

DAY = 86_400


def campaign(caps: list[dict[str, object]], cpm: float | None = None) -> Campaign:
    return msgspec.convert(
        {
            "id": 1,
            "advertiser_id": 1,
            "name": "c",
            "status": "active",
            "start_at": 0,
            "end_at": 10 * DAY,
            "all_venues": True,
            "venue_ids": [],
            "creatives": [],
            "created_at": 0,
            "tier": "standard",
            "weight": 100,
            "timezone": "UTC",
            "targeting": {},
            "exclusions": {},
            "dayparts": [],
            "caps": caps,
            "cpm": cpm,
            "pacing": "even",
            "frequency": None,
            "separation_minutes": 0,
            "share_of_voice": None,
        },
        Campaign,
    )


def test_a_lifetime_goal_is_due_in_proportion_to_the_flight_gone() -> None:
    goal = progress(
        campaign([{"period": "lifetime", "metric": "plays", "limit": 1000}]),
        Delivered(450),
        Delivered(),
        5 * DAY,
        0.5,
    )[0]
    assert goal.due == 500 and not goal.behind
    behind = progress(
        campaign([{"period": "lifetime", "metric": "plays", "limit": 1000}]),
        Delivered(449),
        Delivered(),
        5 * DAY,
        0.5,
    )[0]
    assert behind.behind


def test_a_daily_goal_is_due_in_proportion_to_the_day_gone_and_spend_uses_the_cpm() -> None:
    c = campaign([{"period": "daily", "metric": "spend", "limit": 10.0}], cpm=5.0)
    goal = progress(c, Delivered(), Delivered(plays=0, impressions=1000.0), DAY + DAY // 2, 0.5)[0]
    assert goal.delivered == 5.0 and goal.due == 5.0 and not goal.behind


def test_the_plan_line_is_cumulative_and_none_without_a_lifetime_goal() -> None:
    c = campaign([{"period": "lifetime", "metric": "plays", "limit": 240}])
    line = plan_line(c, [0, 3600, 10 * DAY])
    assert line is not None and line[0] == 1.0 and line[-1] == 240
    assert plan_line(campaign([]), [0]) is None
