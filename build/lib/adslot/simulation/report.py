"""What a simulation shows: delivery against goal, pacing error, over-delivery and fill rate.

Delivery is recounted from the ad requests themselves (plays = counted impressions), independently of the
ledger's counters, so that a bug in the counters shows up as a difference rather than hiding itself.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections import defaultdict
from dataclasses import dataclass, field

import sqlalchemy as sa

from adslot.catalog import Catalog
from adslot.decision.model import Cap, LiveCampaign
from adslot.storage.tables import ad_requests, delivery_counters


@dataclass(slots=True)
class CampaignFigures:
    campaign: LiveCampaign
    plays: int = 0
    impressions: float = 0.0
    goal: Cap | None = None
    delivered_units: int = 0
    over_delivery: int = 0
    """Units above any cap (lifetime, or the worst day), recounted from ad requests: must be 0."""
    counter_violations: int = 0
    """Ledger counters whose delivered + reserved exceeds their cap: must be 0."""
    pacing_errors: list[float] = field(default_factory=list)
    """Per active hour after the first: (delivered - plan) / plan."""

    days: int = 1
    """Days of the flight (campaign timezone) a daily goal applies to."""

    @property
    def goal_total(self) -> int:
        if self.goal is None:
            return 0
        return self.goal.limit * (self.days if self.goal.period == "daily" else 1)

    @property
    def goal_share(self) -> float | None:
        if self.goal is None or self.goal_total == 0:
            return None
        return self.delivered_units / self.goal_total

    @property
    def worst_pacing_error(self) -> float | None:
        return max(self.pacing_errors, key=abs) if self.pacing_errors else None


@dataclass(slots=True)
class SimulationReport:
    requests: int
    fills: int
    campaigns: list[CampaignFigures]
    hours: int

    @property
    def fill_rate(self) -> float:
        return self.fills / self.requests if self.requests else 0.0

    def render(self) -> str:
        lines = [
            "| campaign | tier | pacing | goal | delivered | of goal | worst hourly pacing error | "
            "over-delivery | plays | impressions |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for f in self.campaigns:
            c = f.campaign
            goal = "-"
            if f.goal is not None:
                goal = f"{f.goal.period} {f.goal.metric} {_units(f.goal.metric, f.goal.limit)}"
                if f.goal.period == "daily":
                    goal += f" x {f.days} days"
            share = f"{f.goal_share:.1%}" if f.goal_share is not None else "-"
            worst = f"{f.worst_pacing_error:+.1%}" if f.worst_pacing_error is not None else "-"
            delivered = _units(f.goal.metric, f.delivered_units) if f.goal else "-"
            lines.append(
                f"| {c.id} {c.name} | {c.tier} | {c.pacing} | {goal} | {delivered} | {share} | {worst} | "
                f"{f.over_delivery + f.counter_violations} | {f.plays:,} | {f.impressions:,.0f} |"
            )
        lines.append("")
        lines.append(
            f"requests {self.requests:,}, fills {self.fills:,}, fill rate {self.fill_rate:.1%}, "
            f"over-delivery {sum(f.over_delivery + f.counter_violations for f in self.campaigns)} "
            f"(units above a cap, recounted from ad requests and from the ledger's counters)"
        )
        return "\n".join(lines)


def _units(metric: str, value: int) -> str:
    if metric == "impressions":
        return f"{value / 1000:,.0f}"
    if metric == "spend":
        return f"{value / 1_000_000:,.2f}"
    return f"{value:,}"


def _units_of(metric: str, impressions: float, plays: int, cpm_micros: int | None) -> int:
    if metric == "plays":
        return plays
    if metric == "impressions":
        return round(impressions * 1000)
    return round(impressions * (cpm_micros or 0) / 1000)


def delivery_by_hour(conn: sa.Connection) -> dict[int, dict[int, tuple[int, float]]]:
    """Plays and impressions by campaign id and UTC hour of play_time, counted from the ad requests."""
    bucket = (ad_requests.c.play_time - ad_requests.c.play_time % 3600).label("hour")
    played = ad_requests.c.impression_at.is_not(None)
    rows = conn.execute(
        sa.select(
            ad_requests.c.campaign_id,
            bucket,
            sa.func.count(ad_requests.c.impression_at),
            sa.func.coalesce(sa.func.sum(sa.case((played, ad_requests.c.impressions), else_=0.0)), 0.0),
        ).group_by(ad_requests.c.campaign_id, bucket)
    ).all()
    by_hour: dict[int, dict[int, tuple[int, float]]] = defaultdict(dict)
    for campaign_id, hour, plays, impressions in rows:
        by_hour[int(campaign_id)][int(hour)] = (int(plays), float(impressions))
    return by_hour


def measure(
    conn: sa.Connection, catalog: Catalog, start: int, hours: int, requests: int, fills: int
) -> SimulationReport:
    by_hour = delivery_by_hour(conn)
    counters = {
        str(r.key): (r.cap, int(r.reserved), int(r.delivered))
        for r in conn.execute(sa.select(delivery_counters))
    }
    figures = [
        _figures(campaign, by_hour.get(campaign.id, {}), counters)
        for campaign in sorted(catalog.index.campaigns.values(), key=lambda c: c.id)
    ]
    return SimulationReport(requests, fills, figures, hours)


def _figures(
    campaign: LiveCampaign,
    hours: dict[int, tuple[int, float]],
    counters: dict[str, tuple[int | None, int, int]],
) -> CampaignFigures:
    f = CampaignFigures(campaign)
    f.plays = sum(p for p, _ in hours.values())
    f.impressions = sum(i for _, i in hours.values())
    lifetime = [c for c in campaign.caps if c.period == "lifetime"]
    f.goal = lifetime[0] if lifetime else (campaign.caps[0] if campaign.caps else None)
    tz = zoneinfo.ZoneInfo(campaign.timezone)
    for cap in campaign.caps:
        if cap.period == "lifetime":
            units = _units_of(cap.metric, f.impressions, f.plays, campaign.cpm_micros)
            f.over_delivery += max(0, units - cap.limit)
            if cap is f.goal:
                f.delivered_units = units
            continue
        flight_days = {
            dt.datetime.fromtimestamp(t, tz).date() for t in range(campaign.start_at, campaign.end_at, 3600)
        }
        if cap is f.goal:
            f.days = len(flight_days)
        per_day: dict[dt.date, tuple[int, float]] = defaultdict(lambda: (0, 0.0))
        for hour, (plays, impressions) in hours.items():
            day = dt.datetime.fromtimestamp(hour, tz).date()
            p, i = per_day[day]
            per_day[day] = (p + plays, i + impressions)
        day_units = [_units_of(cap.metric, i, p, campaign.cpm_micros) for p, i in per_day.values()]
        f.over_delivery += sum(max(0, u - cap.limit) for u in day_units)
        if cap is f.goal:
            f.delivered_units = sum(day_units)
    prefix = f"c{campaign.id}:"
    for key, (cap_value, reserved, delivered) in counters.items():
        if key.startswith(prefix) and cap_value is not None and reserved + delivered > cap_value:
            f.counter_violations += reserved + delivered - cap_value
    if campaign.pacing == "even" and f.goal is not None:
        metric = f.goal.metric
        planned = sorted(
            (int(key.rsplit(":", 1)[1]), cap_value)
            for key, (cap_value, _, _) in counters.items()
            if key.startswith(f"c{campaign.id}:hour:") and cap_value
        )
        for hour, plan in planned[1:]:
            plays, impressions = hours.get(hour, (0, 0.0))
            delivered_units = _units_of(metric, impressions, plays, campaign.cpm_micros)
            f.pacing_errors.append((delivered_units - plan) / plan)
    return f
