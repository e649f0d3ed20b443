"""The demand report: what each programmatic partner was asked, answered, won and played, per hour.

Two sources: `demand_stats` (asks and answers, counted per partner and UTC hour of the slots' play time by
each worker's adslot.demand.stats) and `demand_wins` (one row per ad request a partner won, joined to its ad
request for whether it played). Asks are only known per UTC hour, so the report's hours are UTC hours: an
hour counts when it starts within [from, to), its wins included, and it is labelled with its start in the
requested time zone (in zones whose offset is a whole number of hours, that is the local hour). SQL sums per
partner and hour; Python folds the sums into rows, derives the rates and totals, as `aggregate` does for the
delivery report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from adslot.demand.auction import DROP_REASONS
from adslot.demand.notice_rules import NOTICE_FAULTS
from adslot.errors import ApiError
from adslot.reporting.aggregate import ratio
from adslot.reporting.buckets import HOUR, LocalClock, offset_at, segments
from adslot.reporting.query import DemandQuery
from adslot.reporting.repository import MAX_GROUPS
from adslot.reporting.schemas import DemandMetrics, DemandReport, DemandRow, DemandTotal
from adslot.storage.tables import ad_requests, demand_stats, demand_wins

DROPS = tuple(reason for reason in DROP_REASONS if reason != "no_bid")
"""The drop reasons reported (a no-bid answer is not a drop), in auction.DROP_REASONS' order."""
COUNTED = (
    "requests",
    "bids",
    "no_bids",
    "dropped",
    "timeouts",
    "errors",
    "skipped_qps",
    "skipped_breaker",
    "lost",
)
"""The demand_stats metrics kept under their own name; the others are `drop:<reason>`, `error:<reason>` and
`notice:<reason>` (a notice not sent)."""
REASON_PREFIXES = ("drop:", "error:", "notice:")
MICROS = 1_000_000


def first_hour(at: int) -> int:
    """The first UTC hour starting at or after `at`: the report's hours are those starting within [from,
    to), so [first_hour(from), first_hour(to)) in play times."""
    return -(-at // HOUR) * HOUR


def _hours(query: DemandQuery) -> tuple[int, int]:
    return first_hour(query.start), first_hour(query.end)


def _checked(rows: list[sa.RowMapping]) -> list[sa.RowMapping]:
    if len(rows) > MAX_GROUPS:
        raise ApiError(
            400,
            "report_too_large",
            f"the report would have more than {MAX_GROUPS:,} partner hours: shorten from/to",
            "to",
        )
    return rows


def stats_groups(conn: sa.Connection, query: DemandQuery) -> list[dict[str, Any]]:
    """demand_stats per partner and UTC hour: each COUNTED metric under its name, and `reasons`, the
    `drop:`/`error:`/`notice:` metrics by name."""
    s = demand_stats.c
    first, last = _hours(query)
    span = (s.hour >= first, s.hour < last)
    counted = [sa.func.sum(sa.case((s.metric == name, s["count"]), else_=0)).label(name) for name in COUNTED]
    statement = (
        sa.select(s.partner, s.hour, *counted)
        .where(*span, s.metric.in_(COUNTED))
        .group_by(s.partner, s.hour)
        .limit(MAX_GROUPS + 1)
    )
    groups = {
        (row["partner"], int(row["hour"])): {str(k): v for k, v in row.items()} | {"reasons": {}}
        for row in _checked(list(conn.execute(statement).mappings()))
    }
    reasons = (
        sa.select(s.partner, s.hour, s.metric, s["count"])
        .where(*span, sa.or_(*(s.metric.startswith(prefix) for prefix in REASON_PREFIXES)))
        .limit(MAX_GROUPS + 1)
    )
    for row in _checked(list(conn.execute(reasons).mappings())):
        key = (row["partner"], int(row["hour"]))
        group = groups.setdefault(
            key, {"partner": key[0], "hour": key[1], "reasons": {}} | dict.fromkeys(COUNTED, 0)
        )
        group["reasons"][row["metric"]] = int(row["count"])
    return list(groups.values())


def win_groups(conn: sa.Connection, query: DemandQuery) -> list[dict[str, Any]]:
    """demand_wins per partner, UTC hour of play_time and currency: wins, plays (their ad request's
    impression counted; once retention deleted the ad request, its billing came due), the sum of their
    prices, the sum over plays of price * multiplier (micros), and billed."""
    w, a = demand_wins.c, ad_requests.c
    first, last = _hours(query)
    # A literal, not a bound parameter: PostgreSQL matches a GROUP BY expression to the selected one by text.
    hour = w.play_time - w.play_time % sa.literal_column(str(HOUR), sa.BigInteger)
    # Retention deletes old ad requests (not their wins): a win without its ad request played if its billing
    # came due, which the impression's counting sets.
    gone = sa.and_(a.id.is_(None), w.bill_due_at.is_not(None))
    played = sa.or_(a.impression_at.is_not(None), gone)
    statement = (
        sa.select(
            w.partner,
            hour.label("hour"),
            w.currency,
            sa.func.count().label("wins"),
            sa.func.count(sa.case((played, 1))).label("plays"),
            sa.func.sum(w.price_micros).label("price_micros"),
            sa.func.sum(sa.case((played, w.price_micros * w.multiplier))).label("spend_micros"),
            sa.func.count(w.billed_at).label("billed"),
        )
        .select_from(demand_wins.outerjoin(ad_requests, a.id == w.ad_request_id))
        .where(w.play_time >= first, w.play_time < last)
        .group_by(w.partner, hour, w.currency)
        .limit(MAX_GROUPS + 1)
    )
    return [{str(k): v for k, v in row.items()} for row in _checked(list(conn.execute(statement).mappings()))]


@dataclass(slots=True)
class DemandTally:
    """Running sums of one partner hour (or of a partner's total)."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTED, 0))
    errors_by_reason: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(DROPS, 0))
    notice_drops: dict[str, int] = field(default_factory=lambda: dict.fromkeys(NOTICE_FAULTS, 0))
    wins: int = 0
    plays: int = 0
    billed: int = 0
    price_micros: int = 0
    spend_micros: float = 0.0
    currencies: set[str] = field(default_factory=set)

    def add_stats(self, group: Mapping[str, Any]) -> None:
        # PostgreSQL's SUM of integers is NUMERIC (a Decimal in Python): normalise every figure.
        for name in COUNTED:
            self.counts[name] += int(group.get(name) or 0)
        for metric, n in group["reasons"].items():
            kind, _, reason = metric.partition(":")
            target = {"drop": self.drops, "notice": self.notice_drops}.get(kind, self.errors_by_reason)
            target[reason] = target.get(reason, 0) + int(n)

    def add_wins(self, group: Mapping[str, Any]) -> None:
        self.wins += int(group["wins"])
        self.plays += int(group["plays"])
        self.billed += int(group["billed"])
        self.price_micros += int(group["price_micros"] or 0)
        self.spend_micros += float(group["spend_micros"] or 0)
        self.currencies.add(str(group["currency"]))

    def add(self, other: DemandTally) -> None:
        for name, n in other.counts.items():
            self.counts[name] += n
        for name, n in other.errors_by_reason.items():
            self.errors_by_reason[name] = self.errors_by_reason.get(name, 0) + n
        for name, n in other.drops.items():
            self.drops[name] = self.drops.get(name, 0) + n
        for name, n in other.notice_drops.items():
            self.notice_drops[name] = self.notice_drops.get(name, 0) + n
        self.wins += other.wins
        self.plays += other.plays
        self.billed += other.billed
        self.price_micros += other.price_micros
        self.spend_micros += other.spend_micros
        self.currencies |= other.currencies

    def metrics(self) -> dict[str, Any]:
        c = self.counts
        single = len(self.currencies) == 1
        return {
            "requests": c["requests"],
            "bids": c["bids"],
            "bid_rate": ratio(c["bids"], c["requests"]),
            "no_bids": c["no_bids"],
            "dropped": c["dropped"],
            "timeouts": c["timeouts"],
            "errors": c["errors"],
            "errors_by_reason": dict(sorted(self.errors_by_reason.items())),
            "drops": dict(self.drops),
            "skipped_qps": c["skipped_qps"],
            "skipped_breaker": c["skipped_breaker"],
            "lost": c["lost"],
            "wins": self.wins,
            "win_rate": ratio(self.wins, c["bids"]),
            "plays": self.plays,
            "spend": round(self.spend_micros / MICROS / 1000, 6) if single else None,
            "avg_clearing_cpm": round(self.price_micros / MICROS / self.wins, 6) if single else None,
            "currency": next(iter(self.currencies)) if single else None,
            "billed": self.billed,
            "notices_dropped": sum(self.notice_drops.values()),
            "notice_drops": dict(self.notice_drops),
        }


def fold(
    query: DemandQuery, stats: Iterable[Mapping[str, Any]], wins: Iterable[Mapping[str, Any]]
) -> DemandReport:
    """The report from SQL's groups (stats_groups, win_groups): a row per partner and hour with anything
    in it, by partner then hour, and a total per partner."""
    rows: dict[tuple[str, int], DemandTally] = {}
    for group in stats:
        rows.setdefault((group["partner"], int(group["hour"])), DemandTally()).add_stats(group)
    for group in wins:
        rows.setdefault((group["partner"], int(group["hour"])), DemandTally()).add_wins(group)
    found = segments(query.zone, *_hours(query))
    clock = LocalClock()
    out: list[DemandRow] = []
    totals: dict[str, DemandTally] = {}
    for (partner, hour), tally in sorted(rows.items()):
        offset = offset_at(found, hour)
        out.append(
            DemandRow(partner=partner, hour=clock.hour_label(hour + offset, offset), **tally.metrics())
        )
        totals.setdefault(partner, DemandTally()).add(tally)
    return DemandReport(
        from_=query.start,
        to=query.end,
        timezone=query.timezone,
        rows=out,
        totals=[DemandTotal(partner=partner, **tally.metrics()) for partner, tally in totals.items()],
    )


def demand_report(conn: sa.Connection, query: DemandQuery) -> DemandReport:
    return fold(query, stats_groups(conn, query), win_groups(conn, query))


BY_REASON = ("errors_by_reason", "drops", "notice_drops")
METRICS = tuple(name for name in DemandMetrics.__struct_fields__ if name not in BY_REASON)
NOTICE_COLUMN = "notices_dropped_"
"""CSV: `notices_dropped_host` counts the notices dropped for `notice_host`, and so on."""


def notice_column(fault: str) -> str:
    return NOTICE_COLUMN + fault.removeprefix("notice_")


def demand_columns() -> tuple[str, ...]:
    """CSV: partner and hour, the metrics (errors as one column), then a drop_<reason> column each and a
    notices_dropped_<reason> column each."""
    return (
        "partner",
        "hour",
        *METRICS,
        *(f"drop_{reason}" for reason in DROPS),
        *(notice_column(fault) for fault in NOTICE_FAULTS),
    )
