"""Delivery against a campaign's goals, and whether it keeps pace: pure arithmetic, no I/O.

A campaign's goals are its caps. A lifetime goal's plan is even over the flight (the share of the flight
gone is the share of the goal due); a daily goal's plan is its limit each day. A campaign is behind when
what it delivered is under BEHIND_SHARE of what was due.
"""

from __future__ import annotations

from dataclasses import dataclass

from adslot.campaigns.schemas import Campaign

BEHIND_SHARE = 0.9
"""Delivered under 90% of the plan so far counts as behind."""


@dataclass(frozen=True, slots=True)
class Delivered:
    plays: int = 0
    impressions: float = 0.0
    fills: int = 0

    def of(self, metric: str, cpm: float | None) -> float:
        if metric == "plays":
            return float(self.plays)
        if metric == "impressions":
            return self.impressions
        return self.impressions * (cpm or 0.0) / 1000


@dataclass(frozen=True, slots=True)
class GoalProgress:
    period: str
    metric: str
    limit: float
    delivered: float
    due: float
    """What the plan asks for by now."""

    @property
    def share(self) -> float:
        return min(self.delivered / self.limit, 1.0) if self.limit else 0.0

    @property
    def behind(self) -> bool:
        return self.due > 0 and self.delivered < BEHIND_SHARE * self.due


def flight_share(campaign: Campaign, now: int) -> float:
    """The share of the flight gone by `now`, 0 before it starts and 1 after it ends."""
    length = campaign.end_at - campaign.start_at
    if length <= 0:
        return 1.0
    return min(max((now - campaign.start_at) / length, 0.0), 1.0)


def progress(
    campaign: Campaign, lifetime: Delivered, today: Delivered, now: int, day_share: float
) -> list[GoalProgress]:
    """Each goal with what is delivered and what is due: lifetime goals against the flight, daily ones
    against the share of today gone (`day_share`, in the campaign's time zone)."""
    found = []
    for cap in campaign.caps:
        if cap.period == "lifetime":
            delivered = lifetime.of(cap.metric, campaign.cpm)
            due = cap.limit * flight_share(campaign, now)
        else:
            delivered = today.of(cap.metric, campaign.cpm)
            due = cap.limit * day_share if campaign.start_at <= now < campaign.end_at else 0.0
        found.append(GoalProgress(cap.period, cap.metric, float(cap.limit), delivered, due))
    return found


def plan_line(campaign: Campaign, hours: list[int]) -> list[float | None] | None:
    """The even plan of the first lifetime goal, cumulative at the end of each hour; None without one."""
    goal = next((c for c in campaign.caps if c.period == "lifetime"), None)
    if goal is None:
        return None
    length = max(campaign.end_at - campaign.start_at, 1)
    return [goal.limit * min(max((h + 3600 - campaign.start_at) / length, 0.0), 1.0) for h in hours]


def cumulative(values: list[float]) -> list[float]:
    total, out = 0.0, []
    for value in values:
        total += value
        out.append(total)
    return out
