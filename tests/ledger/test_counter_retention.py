"""The sweep drops delivery counters whose hour or day closed longer ago than the retention, on both stores.

A counter that still holds a reservation stays until the ad request holding it is settled; lifetime caps and
separation never close. What is checked is the committed table, read back with SQLAlchemy.
"""

from __future__ import annotations

import sqlalchemy as sa

from adslot.ledger.claims import Claim, Claims, Spacing, closes_at
from adslot.ledger.records import Fire, Issue, Settle
from adslot.storage.tables import delivery_counters
from tests.ledger.stores import PLAY, WINDOW, LedgerDatabase, record

HOUR = 3600
THIS_HOUR = PLAY - PLAY % HOUR
DAY_KEY = "f1:lobby/s1:d:2027-01-15"
LIFE = "c1:life:plays"
RETENTION = 2 * HOUR


def windows(db: LedgerDatabase) -> dict[str, int | None]:
    with db.engine.connect() as conn:
        return {r.key: r.closes_at for r in conn.execute(sa.select(delivery_counters))}


def hour_key(hour: int, campaign: int = 1) -> str:
    return f"f{campaign}:lobby/s1:h:{hour}"


def issue(db: LedgerDatabase, *keys: str, play_time: int = PLAY, separated: bool = True) -> None:
    """An ad request claiming `keys` (and, separated, a spacing), played at once: it holds nothing after."""
    spacings = (Spacing("s:lobby/s1:cars", play_time, 60),) if separated else ()
    claims = Claims(tuple(Claim(key, 1, 100) for key in keys), spacings)
    rec = record(play_time, claims=claims)
    assert db.apply([Issue(rec, claims)])[0].outcome == "issued"
    assert db.apply([Fire(rec.id, "impression", "wrapper", play_time + 1)])[0].outcome == "counted"


def test_each_counter_written_records_when_its_window_closes(db: LedgerDatabase) -> None:
    issue(db, hour_key(THIS_HOUR), f"c1:hour:{THIS_HOUR}", DAY_KEY, LIFE)
    assert windows(db) == {
        hour_key(THIS_HOUR): THIS_HOUR + HOUR,
        f"c1:hour:{THIS_HOUR}": THIS_HOUR + HOUR,
        DAY_KEY: closes_at(DAY_KEY),
        LIFE: None,
        "s:lobby/s1:cars": None,
    }


def test_the_sweep_drops_closed_counters_only_after_the_retention(db: LedgerDatabase) -> None:
    issue(db, hour_key(THIS_HOUR), LIFE)
    closed = THIS_HOUR + HOUR
    db.apply([Settle(closed + RETENTION - 1, retention=RETENTION)])
    assert hour_key(THIS_HOUR) in windows(db), "dropped before its retention ended"
    db.apply([Settle(closed + RETENTION + 1, retention=RETENTION)])
    assert set(windows(db)) == {LIFE, "s:lobby/s1:cars"}, "lifetime caps and separation never close"


def test_a_closed_counter_holding_a_reservation_stays_until_its_ad_request_is_settled(
    db: LedgerDatabase,
) -> None:
    old = THIS_HOUR - 10 * 24 * HOUR  # a window long closed, still named by an unsettled ad request
    claims = Claims((Claim(hour_key(old), 1, 5),))
    rec = record(PLAY, claims=claims)
    db.apply([Issue(rec, claims)])
    [verdict] = db.apply([Settle(PLAY, retention=RETENTION)])
    assert verdict.settled == 0 and hour_key(old) in windows(db)
    # Its expiry releases the reservation and, in the same batch, the empty counter goes.
    [verdict] = db.apply([Settle(PLAY + WINDOW + 61, retention=RETENTION)])
    assert verdict.settled == 1 and hour_key(old) not in windows(db)


def test_one_sweep_drops_at_most_its_limit_oldest_window_first(db: LedgerDatabase) -> None:
    hours = [THIS_HOUR - n * HOUR for n in (3, 1, 2)]
    for n, hour in enumerate(hours):
        issue(db, hour_key(hour, campaign=n + 1), play_time=hour + 60, separated=False)
    now = THIS_HOUR + HOUR + RETENTION
    db.apply([Settle(now, limit=2, retention=RETENTION)])
    assert [k for k in windows(db) if k.startswith("f")] == [hour_key(hours[1], campaign=2)]
    db.apply([Settle(now, limit=2, retention=RETENTION)])
    assert [k for k in windows(db) if k.startswith("f")] == []
