"""Each batch folds what it tells of each screen into screen_status and screen_plays (store.py, step 4):
one row per screen and batch, on both databases."""

from __future__ import annotations

import time

import sqlalchemy as sa

from adslot.ledger.records import Fire, Issue, NoFill
from adslot.ledger.store import LedgerStore
from adslot.storage.tables import screen_plays, screen_status
from tests.ledger.stores import PLAY, LedgerDatabase, record


def _status(db: LedgerDatabase) -> dict[tuple[str, str], sa.Row[tuple[object, ...]]]:
    with db.engine.connect() as conn:
        return {(r.venue_id, r.screen_id): r for r in conn.execute(sa.select(screen_status))}


def _plays(db: LedgerDatabase) -> dict[tuple[str, str, int], int]:
    with db.engine.connect() as conn:
        return {(r.venue_id, r.screen_id, r.hour): r.plays for r in conn.execute(sa.select(screen_plays))}


def test_requests_fills_and_counted_plays_reach_each_screens_row_once_per_batch(db: LedgerDatabase) -> None:
    before = int(time.time())
    first, second = record(), record()
    verdicts = db.apply(
        [
            Issue(first),
            NoFill("lobby", "s2", PLAY),
            Issue(second),
            NoFill("lobby", "s2", PLAY),
            NoFill("lobby", None, PLAY),
        ]
    )
    assert [v.outcome for v in verdicts] == ["issued", "recorded", "issued", "recorded", "recorded"]
    rows = _status(db)
    assert set(rows) == {("lobby", "s1"), ("lobby", "s2"), ("lobby", "")}
    s1, s2 = rows["lobby", "s1"], rows["lobby", "s2"]
    assert before <= s1.last_request_at <= int(time.time()) and s1.last_fill_at == s1.last_request_at
    assert (s1.window_fills, s1.window_plays, s1.last_play_at) == (2, 0, None)
    assert s2.last_request_at >= before and s2.last_fill_at is None and s2.window_fills == 0
    first_seen = s1.first_seen_at

    # The first impression of each counts as a play of its screen; a repeat (duplicate) does not.
    db.apply(
        [
            Fire(first.id, "impression", "wrapper", PLAY + 1),
            Fire(first.id, "impression", "wrapper", PLAY + 2),
            Fire(second.id, "impression", "inline", PLAY + 3),
        ]
    )
    s1 = _status(db)["lobby", "s1"]
    assert (s1.window_fills, s1.window_plays, s1.last_play_at) == (2, 2, PLAY + 3)
    assert s1.first_seen_at == first_seen and s1.last_fill_at is not None
    assert _plays(db) == {("lobby", "s1", PLAY + 1 - (PLAY + 1) % 3600): 2}

    # A later batch's older play time never moves the last play back.
    third = record()
    db.apply([Issue(third)])
    db.apply([Fire(third.id, "impression", "wrapper", PLAY - 7200)])
    s1 = _status(db)["lobby", "s1"]
    assert (s1.window_fills, s1.window_plays, s1.last_play_at) == (3, 3, PLAY + 3)
    assert sum(_plays(db).values()) == 3


def test_plays_of_ad_requests_the_store_issued_and_of_others_reach_the_same_rows(db: LedgerDatabase) -> None:
    """A store knows the screens of the ad requests it issued (screens_of.py) and locates the others through
    their rows; both kinds of play count alike, in one batch."""
    elsewhere = record(screen_id="s2")
    db.apply([Issue(elsewhere)])  # issued by another store (another worker or writer)

    async def scenario(store: LedgerStore) -> None:
        mine = [record(screen_id="s1"), record(screen_id="s2"), record(venue_id="atrium", screen_id=None)]
        await store.apply([Issue(r) for r in mine])
        verdicts = await store.apply(
            [Fire(r.id, "impression", "wrapper", PLAY + 10) for r in [*mine, elsewhere]]
        )
        assert [v.outcome for v in verdicts] == ["counted"] * 4

    db.run(scenario)
    rows = _status(db)
    hour = PLAY + 10 - (PLAY + 10) % 3600
    assert {key: (r.window_fills, r.window_plays, r.last_play_at) for key, r in rows.items()} == {
        ("lobby", "s1"): (1, 1, PLAY + 10),
        ("lobby", "s2"): (2, 2, PLAY + 10),
        ("atrium", ""): (1, 1, PLAY + 10),
    }
    assert _plays(db) == {("lobby", "s1", hour): 1, ("lobby", "s2", hour): 2, ("atrium", "", hour): 1}
