"""Programmatic ad requests (a demand partner won them: no campaign, no creative) in the delivery report, on
SQLite and PostgreSQL: plays split into direct and programmatic in every row and the totals, a row of their
own named "programmatic" when grouped by campaign or creative, and reports byte-identical after retention
rolls them up."""

from __future__ import annotations

import csv
import io
import json
import random
from typing import Any

import pytest
import sqlalchemy as sa

from adslot.reporting.formats import delivery_csv, delivery_json
from adslot.reporting.query import parse_delivery
from adslot.reporting.repository import delivery_report
from adslot.storage.tables import invalid_fires, report_rollups
from tests.reporting.support import ad_request, insert, played, utc
from tests.retention.support import DAYS, NOW, START, reports, roll_all, seed

T = utc("2026-03-02T10:00")


@pytest.fixture
def db(db: sa.Engine) -> sa.Engine:
    """The reporting tests' database, emptied of rollups and flagged fires too."""
    with db.begin() as conn:
        conn.execute(sa.delete(report_rollups))
        conn.execute(sa.delete(invalid_fires))
    return db


def programmatic(play_time: int, **values: Any) -> dict[str, Any]:
    return ad_request(play_time, campaign_id=None, creative_id=None, **values)


def report(engine: sa.Engine, group_by: str, **params: str) -> dict[str, Any]:
    query = parse_delivery(start=str(T), end=str(T + 3600), group_by=group_by, **params)
    with engine.connect() as conn:
        result: dict[str, Any] = json.loads(delivery_json(delivery_report(conn, query, T + 7200)))["data"]
    return result


def ledger(engine: sa.Engine) -> None:
    """Campaign 1: 3 fills, 2 played; programmatic: 4 fills, 3 played (one with an invalid fire)."""
    rows = [
        played(T, "start"),
        played(T + 1),
        ad_request(T + 2),
        programmatic(T + 3, impression_at=T + 3, start_at=T + 3),
        programmatic(T + 4, impression_at=T + 4),
        programmatic(T + 5, impression_at=T + 5, venue_id="v2"),
        programmatic(T + 6),
    ]
    insert(engine, rows)
    with engine.begin() as conn:
        fire = {"event": "start", "layer": "inline", "reason": "too_fast", "played_at": T + 9}
        conn.execute(sa.insert(invalid_fires), [{"ad_request_id": rows[3]["id"], **fire}])


def test_every_row_and_the_totals_split_plays_into_direct_and_programmatic(db: sa.Engine) -> None:
    ledger(db)
    data = report(db, "venue")
    assert [
        (r["venue_id"], r["plays"], r["direct_plays"], r["programmatic_plays"]) for r in data["rows"]
    ] == [
        ("v1", 4, 2, 2),
        ("v2", 1, 0, 1),
    ]
    totals = data["totals"]
    assert (totals["fills"], totals["plays"], totals["direct_plays"], totals["programmatic_plays"]) == (
        7,
        5,
        2,
        3,
    )


def test_grouped_by_campaign_or_creative_programmatic_ad_requests_are_a_row_named_programmatic(
    db: sa.Engine,
) -> None:
    ledger(db)
    by_campaign = report(db, "campaign")["rows"]
    assert [(r["campaign_id"], r["fills"], r["plays"], r["programmatic_plays"]) for r in by_campaign] == [
        ("programmatic", 4, 3, 3),
        (1, 3, 2, 0),
    ]
    assert by_campaign[0]["invalid"]["too_fast"] == 1 and by_campaign[0]["starts"] == 1
    by_creative = report(db, "campaign,creative")["rows"]
    assert [(r["campaign_id"], r["creative_id"], r["fills"]) for r in by_creative] == [
        ("programmatic", "programmatic", 4),
        (1, 10, 3),
    ]
    query = parse_delivery(start=str(T), end=str(T + 3600), group_by="campaign", fmt="csv")
    with db.connect() as conn:
        text = delivery_csv(delivery_report(conn, query, T + 7200)).decode()
    header, *lines = list(csv.reader(io.StringIO(text)))
    assert header[0] == "campaign_id" and header[-2:] == ["direct_plays", "programmatic_plays"]
    assert [(line[0], line[-2], line[-1]) for line in lines] == [("programmatic", "0", "3"), ("1", "2", "0")]


def test_a_campaign_filter_leaves_programmatic_ad_requests_out(db: sa.Engine) -> None:
    ledger(db)
    (row,) = report(db, "venue", campaign_id="1")["rows"]
    assert (row["fills"], row["plays"], row["direct_plays"], row["programmatic_plays"]) == (3, 2, 2, 0)


def programmatic_ledger(count: int, seed_: int = 5) -> list[dict[str, Any]]:
    """Settled programmatic ad requests over the retention ledger's days, played or expired."""
    rng = random.Random(seed_)
    rows = []
    for _ in range(count):
        play_time = START + rng.randrange(DAYS * 86_400)
        values: dict[str, Any] = {
            "venue_id": rng.choice(("v1", "v2", "v3")),
            "screen_id": rng.choice((None, "s1", "s2")),
            "impressions": rng.choice((0.5, 1.0, 12.5)),
            "settled_at": play_time + 901,
        }
        if rng.random() < 0.7:
            values |= {"impression_at": play_time + 2, "start_at": play_time + 3, "settle_reason": "played"}
        else:
            values |= {"settle_reason": "expired"}
        rows.append(programmatic(play_time, **values))
    return rows


def test_reports_with_programmatic_ad_requests_are_byte_identical_after_the_rollup(db: sa.Engine) -> None:
    seed(db, count=600)
    insert(db, programmatic_ledger(300))
    before = reports(db)
    assert roll_all(db) > 0
    with db.connect() as conn:
        rolled = conn.execute(
            sa.select(sa.func.sum(report_rollups.c.plays)).where(report_rollups.c.campaign_id == 0)
        ).scalar()
    assert rolled and int(rolled) > 0  # programmatic plays were rolled up, under campaign 0
    after = reports(db)
    changed = [name for name in before if before[name] != after[name]]
    assert not changed, changed[:3]
    whole = parse_delivery(start=str(START), end=str(START + DAYS * 86_400), group_by="campaign")
    with db.connect() as conn:
        rows = delivery_report(conn, whole, NOW).rows
    assert rows[0].campaign_id == "programmatic" and rows[0].programmatic_plays == rows[0].plays > 0
