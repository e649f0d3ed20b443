"""A varied ledger of past ad requests, and the delivery reports over it, byte for byte."""

from __future__ import annotations

import random
from typing import Any

import sqlalchemy as sa

from adslot.reporting.formats import delivery_csv, delivery_json
from adslot.reporting.query import parse_delivery
from adslot.reporting.repository import delivery_report
from adslot.retention.rollup import roll_batch
from adslot.storage.tables import invalid_fires
from tests.reporting.support import ad_request, insert, stat, utc

START = utc("2026-03-27T00:00")
"""The ledger's first day; Europe/Berlin moves its clocks on 2026-03-29, within it."""
DAYS = 8
NOW = utc("2026-04-08T12:00")
RETENTION = 8
CUTOFF = utc("2026-03-31T12:00")
"""cutoff(NOW, RETENTION)."""
EVENTS = ("start", "first_quartile", "midpoint", "third_quartile", "complete")
ZONES = ("UTC", "Europe/Berlin", "Asia/Kolkata", "Asia/Kathmandu", "America/St_Johns", "Australia/Lord_Howe")
GROUPINGS = (
    "campaign",
    "creative",
    "venue",
    "screen",
    "day",
    "hour",
    "campaign,day",
    "venue,screen,hour",
    "creative,hour",
    "screen,day",
)


def ledger(count: int, seed: int = 7) -> list[dict[str, Any]]:
    """`count` ad requests at any second of the DAYS days: played (with some events, duplicates and late
    fires), expired, released, and a few old ones never settled, over 3 venues, 3 screens, 3 campaigns."""
    rng = random.Random(seed)
    rows = []
    for _ in range(count):
        play_time = START + rng.randrange(DAYS * 86_400)
        campaign = rng.randint(1, 3)
        values: dict[str, Any] = {
            "venue_id": rng.choice(("v1", "v2", "v3")),
            "screen_id": rng.choice((None, "s1", "s2")),
            "campaign_id": campaign,
            "creative_id": campaign * 10 + rng.randint(0, 1),
            "impressions": rng.choice((0.5, 1.0, 1.25, 2.0)),
            "duplicate_count": rng.choice((0, 0, 0, 1, 2)),
            "late_count": rng.choice((0, 0, 0, 0, 1)),
        }
        state = rng.random()
        if state < 0.6:
            events = {f"{event}_at": play_time + 5 for event in EVENTS if rng.random() < 0.8}
            values |= {"impression_at": play_time + 2, "settle_reason": "played", **events}
            values["settled_at"] = play_time + 901
        elif state < 0.8:
            values |= {"settle_reason": "expired", "settled_at": play_time + 901}
        elif state < 0.95:
            values |= {"settle_reason": "released", "settled_at": play_time - 30}
        else:  # never settled (the sweep is behind): the rollup must leave it alone
            if rng.random() < 0.5:
                values["impression_at"] = play_time + 2
        rows.append(ad_request(play_time, **values))
    return rows


def flagged(rows: list[dict[str, Any]], seed: int = 11) -> list[dict[str, Any]]:
    """invalid_fires rows for about a fifth of the ad requests: one to three events each, any reason."""
    rng = random.Random(seed)
    fires = []
    for row in rows:
        if rng.random() < 0.2:
            for event in rng.sample(("midpoint", "third_quartile", "complete"), rng.randint(1, 3)):
                reason = rng.choice(("too_fast", "out_of_order", "foreign_network", "burst"))
                fire = {"event": event, "layer": rng.choice(("wrapper", "inline")), "reason": reason}
                fires.append({"ad_request_id": row["id"], "played_at": row["play_time"] + 9, **fire})
    return fires


def seed(engine: sa.Engine, count: int = 1500) -> list[dict[str, Any]]:
    rows = ledger(count)
    stats = [
        stat(venue, START + hour * 3600, 7 + hour % 5, screen)
        for venue in ("v1", "v2", "v3")
        for screen in ("", "s1", "s2")
        for hour in range(DAYS * 24)
    ]
    insert(engine, rows, stats)
    with engine.begin() as conn:
        conn.execute(sa.insert(invalid_fires), flagged(rows))
    return rows


def queries() -> list[dict[str, str]]:
    """Every grouping in every zone over the whole ledger, and filtered ones over quarter-hour bounds."""
    whole = {"start": str(START - 86_400), "end": str(START + (DAYS + 1) * 86_400)}
    found = [{**whole, "group_by": g, "timezone": z} for g in GROUPINGS for z in ZONES]
    part = {"start": str(utc("2026-03-30T18:15")), "end": str(utc("2026-04-01T18:15"))}  # Kathmandu days
    found += [
        {**part, "group_by": "hour", "timezone": "Asia/Kathmandu", **only}
        for only in ({"campaign_id": "2"}, {"venue_id": "v2"}, {"venue_id": "v1", "screen_id": "s1"}, {})
    ]
    return found


def reports(engine: sa.Engine) -> dict[str, bytes]:
    """Each query's report as JSON and as CSV."""
    found = {}
    with engine.connect() as conn:
        for params in queries():
            report = delivery_report(conn, parse_delivery(**params), NOW)  # type: ignore[arg-type]
            found[f"{params} json"] = delivery_json(report)
            found[f"{params} csv"] = delivery_csv(report)
    return found


def roll_all(engine: sa.Engine, limit: int = 500, before: int = CUTOFF) -> int:
    """Batches until none is left; the ad requests rolled up."""
    total = 0
    for _ in range(10_000):
        batch = roll_batch(engine, before, NOW, limit)
        total += batch.rows
        if batch.rows == 0 and not batch.busy:
            return total
    raise AssertionError("the rollup did not end")
