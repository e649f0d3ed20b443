"""The real stores (SQLite and PostgreSQL) reserve, deliver, release and settle on the database rows.

Every test applies batches exactly as the group committer hands them over and then reads the rows back with
SQLAlchemy, so what is checked is what is committed, not what the store answered.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from adslot.environment import prepare_database
from adslot.ledger.claims import Claim, Claims, PacePlan, Spacing
from adslot.ledger.records import Fire, Issue, NoFill, Release, Settle
from adslot.ledger.sqlite_store import SqliteLedgerStore
from adslot.ledger.store import LedgerStore
from adslot.storage.database import make_engine
from tests.conftest import free_port, make_settings
from tests.ledger.stores import PLAY, WINDOW, LedgerDatabase, record

HOUR_START = PLAY - PLAY % 3600
LIFE = "c1:life:plays"


def capped(cap: int, key: str = LIFE, units: int = 1) -> Claims:
    return Claims((Claim(key, units, cap),))


# --- issue ----------------------------------------------------------------------------------------


def test_an_ad_request_without_claims_is_issued_and_touches_no_counter(db: LedgerDatabase) -> None:
    rec = record()
    [verdict] = db.apply([Issue(rec)])
    assert (verdict.outcome, verdict.expires_at, dict(verdict.counters)) == ("issued", rec.expires_at, {})
    row = db.rows()[rec.id]
    assert row["claims"] is None and row["settled_at"] is None and row["impressions"] == 1.0
    assert db.counters() == {}


def test_an_admitted_issue_stores_its_claims_and_reserves_them(db: LedgerDatabase) -> None:
    claims = Claims((Claim(LIFE, 1, 3), Claim("c1:life:impressions", 2500, 10_000)))
    rec = record(claims=claims, impressions=2.5)
    [verdict] = db.apply([Issue(rec, claims)])
    assert verdict.outcome == "issued" and verdict.reason is None
    assert dict(verdict.counters) == {LIFE: (3, 1, 0, None), "c1:life:impressions": (10_000, 2500, 0, None)}
    row = db.rows()[rec.id]
    assert json.loads(row["claims"]) == [[LIFE, 1], ["c1:life:impressions", 2500]]
    assert row["impressions"] == 2.5
    assert db.counters() == {LIFE: (3, 1, 0, None), "c1:life:impressions": (10_000, 2500, 0, None)}


def test_the_stored_claims_are_the_admitted_ones_whatever_the_record_said(db: LedgerDatabase) -> None:
    claims = capped(3)
    rec = dataclasses.replace(record(), claims='[["something-else",99]]')
    db.apply([Issue(rec, claims)])
    assert json.loads(db.rows()[rec.id]["claims"]) == [[LIFE, 1]]


def test_a_refused_issue_stores_nothing_and_says_why_with_the_counters(db: LedgerDatabase) -> None:
    db.apply([Issue(record(claims=capped(1)), capped(1))])
    refused = record(claims=capped(1))
    [verdict] = db.apply([Issue(refused, capped(1))])
    assert (verdict.outcome, verdict.reason, verdict.expires_at) == ("rejected", "cap_reached", None)
    assert dict(verdict.counters) == {LIFE: (1, 1, 0, None)}
    assert refused.id not in db.rows()
    assert db.counters()[LIFE] == (1, 1, 0, None)


def test_issues_in_one_batch_are_admitted_in_order_until_the_cap(db: LedgerDatabase) -> None:
    ops = [Issue(record(claims=capped(2)), capped(2)) for _ in range(4)]
    verdicts = db.apply(ops)
    assert [v.outcome for v in verdicts] == ["issued", "issued", "rejected", "rejected"]
    assert db.counters()[LIFE] == (2, 2, 0, None)
    assert len(db.rows()) == 2


def test_a_new_pacing_hour_is_sized_from_the_goal_left_in_the_database(db: LedgerDatabase) -> None:
    db.apply([Issue(record(claims=capped(100)), capped(100)) for _ in range(20)])
    hour = f"c1:hour:{HOUR_START}"
    paced = Claims((Claim(LIFE, 1, 100), Claim(hour, 1, None, PacePlan(LIFE, 100, 9))))
    db.apply([Issue(record(claims=paced), paced)])
    assert db.counters()[hour] == (9, 1, 0, None)  # ceil((100 - 20) / 9)
    verdicts = db.apply([Issue(record(claims=paced), paced) for _ in range(9)])
    assert [v.outcome for v in verdicts] == ["issued"] * 8 + ["rejected"]
    assert verdicts[-1].reason == "paced"
    assert db.counters()[hour] == (9, 9, 0, None)


def test_separation_refuses_a_play_too_close_to_the_last_of_its_category(db: LedgerDatabase) -> None:
    key = "s:lobby/s1:cars"

    def spaced(play_time: int) -> Claims:
        return Claims((), (Spacing(key, play_time, 600),))

    first, close, clear = PLAY, PLAY + 300, PLAY + 600
    verdicts = db.apply([Issue(record(p, claims=spaced(p)), spaced(p)) for p in (first, close, clear)])
    assert [(v.outcome, v.reason) for v in verdicts] == [
        ("issued", None),
        ("rejected", "separation"),
        ("issued", None),
    ]
    assert db.counters()[key] == (600, 0, 0, clear)


# --- impressions ----------------------------------------------------------------------------------------


def test_a_counted_impression_is_delivered_once_when_the_sweep_settles_it_played(db: LedgerDatabase) -> None:
    rec = record(claims=capped(5))
    db.apply([Issue(rec, capped(5))])
    fires = [Fire(rec.id, "impression", "wrapper", PLAY + 5), Fire(rec.id, "impression", "wrapper", PLAY + 6)]
    assert [v.outcome for v in db.apply(fires)] == ["counted", "duplicate"]
    assert [v.outcome for v in db.apply([Fire(rec.id, "impression", "inline", PLAY + 7)])] == ["echo"]
    assert [v.outcome for v in db.apply([Fire(rec.id, "complete", "wrapper", PLAY + 20)])] == ["counted"]
    assert db.counters()[LIFE] == (5, 1, 0, None), "held until it is settled: the sum is what admission reads"
    [verdict] = db.apply([Settle(rec.expires_at + 61)])
    assert (verdict.settled, dict(verdict.counters)) == (1, {LIFE: (5, 0, 1, None)})
    assert db.counters()[LIFE] == (5, 0, 1, None)
    assert db.apply([Settle(rec.expires_at + 61)])[0].settled == 0
    assert db.counters()[LIFE] == (5, 0, 1, None)


# --- release --------------------------------------------------------------------------------------------


def test_an_early_release_returns_the_reservation_and_later_fires_are_released_not_counted(
    db: LedgerDatabase,
) -> None:
    rec = record(claims=capped(1))
    db.apply([Issue(rec, capped(1))])
    [verdict] = db.apply([Release(rec.id, 5, PLAY - 30)])
    assert (verdict.outcome, verdict.expires_at) == ("released", rec.expires_at)
    assert db.counters()[LIFE] == (1, 0, 0, None)
    row = db.rows()[rec.id]
    assert (row["settled_at"], row["settle_reason"]) == (PLAY - 30, "released")
    fired = db.apply(
        [Fire(rec.id, "impression", "wrapper", PLAY + 5), Fire(rec.id, "start", "inline", PLAY + 6)]
    )
    assert [v.outcome for v in fired] == ["released", "released"]
    row = db.rows()[rec.id]
    assert row["impression_at"] is None and row["late_count"] == 2
    assert db.counters()[LIFE] == (1, 0, 0, None)
    assert [v.outcome for v in db.apply([Release(rec.id, 5, PLAY - 20)])] == ["already_released"]
    # The room it gave back is there for the next ad request.
    assert db.apply([Issue(record(claims=capped(1)), capped(1))])[0].outcome == "issued"


def test_a_played_ad_request_cannot_be_released(db: LedgerDatabase) -> None:
    rec = record(claims=capped(1))
    db.apply([Issue(rec, capped(1))])
    db.apply([Fire(rec.id, "impression", "wrapper", PLAY + 1)])
    assert [v.outcome for v in db.apply([Release(rec.id, 5, PLAY + 2)])] == ["played"]
    assert db.counters()[LIFE] == (1, 1, 0, None), "still held, for the sweep to deliver"
    assert db.rows()[rec.id]["settled_at"] is None


def test_a_release_after_expiry_is_late_and_settles_it_as_expired(db: LedgerDatabase) -> None:
    rec = record(claims=capped(1))
    db.apply([Issue(rec, capped(1))])
    assert [v.outcome for v in db.apply([Release(rec.id, 5, rec.expires_at + 1)])] == ["late"]
    row = db.rows()[rec.id]
    assert (row["settled_at"], row["settle_reason"]) == (rec.expires_at + 1, "expired")
    assert db.counters()[LIFE] == (1, 0, 0, None)


def test_another_accounts_ad_request_is_unknown_and_untouched(db: LedgerDatabase) -> None:
    rec = record(claims=capped(1))
    db.apply([Issue(rec, capped(1))])
    missing = record().id
    assert [v.outcome for v in db.apply([Release(rec.id, 6, PLAY), Release(missing, 5, PLAY)])] == [
        "unknown",
        "unknown",
    ]
    assert db.rows()[rec.id]["settled_at"] is None
    assert db.counters()[LIFE] == (1, 1, 0, None)


# --- the expiry settle ----------------------------------------------------------------------------------


def test_the_sweep_releases_unplayed_expired_ad_requests_and_delivers_played_ones(db: LedgerDatabase) -> None:
    unplayed, played, fresh = (record(claims=capped(10)) for _ in range(3))
    recent = record(PLAY + 100, claims=capped(10))
    db.apply([Issue(r, capped(10)) for r in (unplayed, played, fresh, recent)])
    db.apply([Fire(played.id, "impression", "wrapper", PLAY + 1)])
    now = PLAY + WINDOW + 61  # past the 60 s grace for those playing at PLAY, not for `recent`
    [verdict] = db.apply([Settle(now)])
    assert (verdict.outcome, verdict.settled) == ("settled", 3)
    assert dict(verdict.counters) == {LIFE: (10, 1, 1, None)}  # what the settlement left, for the cache
    rows = db.rows()
    assert (rows[unplayed.id]["settle_reason"], rows[unplayed.id]["settled_at"]) == ("expired", now)
    assert rows[played.id]["settle_reason"] == "played"
    assert rows[fresh.id]["settle_reason"] == "expired"
    assert rows[recent.id]["settled_at"] is None
    assert db.counters()[LIFE] == (10, 1, 1, None)
    assert db.apply([Settle(now)])[0].settled == 0  # nothing is settled twice


def test_the_sweep_settles_at_most_its_limit_oldest_first(db: LedgerDatabase) -> None:
    recs = [record(PLAY + i, claims=capped(10)) for i in range(5)]
    db.apply([Issue(r, capped(10)) for r in recs])
    now = PLAY + WINDOW + 3600
    assert db.apply([Settle(now, limit=2)])[0].settled == 2
    rows = db.rows()
    assert [rows[r.id]["settle_reason"] for r in recs] == ["expired", "expired", None, None, None]
    assert db.counters()[LIFE] == (10, 3, 0, None)


def test_an_ad_request_without_claims_is_settled_too_so_the_unsettled_index_stays_small(
    db: LedgerDatabase,
) -> None:
    rec = record()
    db.apply([Issue(rec)])
    assert db.apply([Settle(PLAY + WINDOW + 61)])[0].settled == 1
    assert db.rows()[rec.id]["settle_reason"] == "expired"
    assert db.counters() == {}


# --- request stats ----------------------------------------------------------------------------------------


def test_issues_and_no_fills_count_in_request_stats_once_per_key_and_batch(db: LedgerDatabase) -> None:
    ops = [
        Issue(record(PLAY)),
        Issue(record(PLAY + 10, screen_id=None)),
        NoFill("lobby", "s1", PLAY + 20),
        NoFill("lobby", "s1", PLAY + 30),
        NoFill("lobby", None, PLAY + 3600),
        Issue(record(claims=capped(0)), capped(0)),  # refused: its slot is counted when it ends
    ]
    verdicts = db.apply(ops)
    assert [v.outcome for v in verdicts] == [
        "issued",
        "issued",
        "recorded",
        "recorded",
        "recorded",
        "rejected",
    ]
    db.apply([NoFill("lobby", "s1", PLAY)])
    assert db.stats() == {
        ("lobby", "s1", HOUR_START): (4, 1),
        ("lobby", "", HOUR_START): (1, 1),
        ("lobby", "", HOUR_START + 3600): (1, 0),
    }


def test_issues_and_no_fills_count_in_key_stats_under_their_key_once_per_key_hour_and_batch(
    db: LedgerDatabase,
) -> None:
    """Per key as request_stats counts per screen, whatever the screen; an ad request without a key (the
    simulator's) counts in request_stats only."""
    ops = [
        Issue(record(PLAY, key_id=7)),
        Issue(record(PLAY + 10, screen_id="s2", key_id=7)),
        Issue(record(PLAY + 20, key_id=8)),
        NoFill("lobby", "s3", PLAY + 30, 7),
        NoFill("atrium", None, PLAY + 3600, 7),
        Issue(record(PLAY, claims=capped(0), key_id=7), capped(0)),  # refused: counted when its slot ends
        Issue(record(PLAY)),
        NoFill("lobby", "s1", PLAY),
    ]
    db.apply(ops)
    db.apply([NoFill("lobby", "s1", PLAY + 40, 8)])
    assert db.key_stats() == {
        (7, HOUR_START): (3, 2),
        (7, HOUR_START + 3600): (1, 0),
        (8, HOUR_START): (2, 1),
    }
    assert sum(requests for requests, _ in db.stats().values()) == 8
    assert {row["key_id"] for row in db.rows().values()} == {7, 8, None}


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[LedgerDatabase]:
    """A SQLite ledger only: statement tracing is SQLite's (PostgreSQL runs the same Batch plan)."""
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    env = settings.environment("production")
    prepare_database(env)
    engine = make_engine(env)
    yield LedgerDatabase("sqlite", env, engine)
    engine.dispose()


def test_a_batch_of_claimless_issues_costs_sqlite_no_counter_statement(sqlite_db: LedgerDatabase) -> None:
    db = sqlite_db
    seen: list[str] = []

    async def scenario(store: LedgerStore) -> None:
        assert isinstance(store, SqliteLedgerStore)
        writer = store._writer
        assert isinstance(writer, sqlite3.Connection)
        writer.set_trace_callback(seen.append)
        await store.apply([Issue(record(key_id=n % 2)) for n in range(50)])
        writer.set_trace_callback(None)

    db.run(scenario)
    others = [_statement(s) for s in seen if not s.startswith("INSERT INTO ad_requests")]
    assert others == [
        "BEGIN IMMEDIATE",
        "PRAGMA data_version",
        "INSERT INTO request_stats",
        "INSERT INTO key_stats",
        "INSERT INTO screen_status",  # one row per screen (ledger/store.py's screen_requests)
        "COMMIT",
    ]


def _statement(sql: str) -> str:
    """A traced statement's verb and table, its WITH clause (the screen_status upsert's) left out."""
    if sql.startswith("WITH "):
        sql = sql[sql.index(" INSERT INTO ") + 1 :]
    return sql.split(" (")[0]


def test_a_batch_of_impressions_on_capped_ad_requests_costs_sqlite_no_counter_statement(
    sqlite_db: LedgerDatabase,
) -> None:
    """A counted impression moves no reservation at once, so it never locks a campaign's counters."""
    db = sqlite_db
    made = [record(claims=capped(100)) for _ in range(5)]
    db.apply([Issue(r, capped(100)) for r in made])
    seen: list[str] = []

    async def scenario(store: LedgerStore) -> list[str]:
        assert isinstance(store, SqliteLedgerStore)
        writer = store._writer
        assert isinstance(writer, sqlite3.Connection)
        writer.set_trace_callback(seen.append)
        verdicts = await store.apply([Fire(r.id, "impression", "wrapper", PLAY + 1) for r in made])
        writer.set_trace_callback(None)
        return [v.outcome for v in verdicts]

    assert db.run(scenario) == ["counted"] * 5
    assert seen and not [statement for statement in seen if "delivery_counters" in statement]
    assert db.counters()[LIFE] == (100, 5, 0, None)
