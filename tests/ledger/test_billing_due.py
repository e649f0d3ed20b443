"""A programmatic ad request's billing notice falls due in the transaction that counts its first impression,
through the real stores: once, and never for an ad request released or played too late."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa

from adslot.ledger.records import AdRequest, Fire, Issue, Operation, Release, Verdict, Win
from adslot.storage.tables import demand_wins
from tests.ledger.stores import PLAY, WINDOW, LedgerDatabase, record


def programmatic() -> tuple[AdRequest, Win]:
    ad = dataclasses.replace(record(), campaign_id=None, creative_id=None)
    win = Win(
        ad_request_id=ad.id,
        partner="dsp",
        demand_creative_id=None,
        crid="c1",
        auction_id="a1",
        bid_id=None,
        imp_id="1",
        seat="seat-1",
        ad_id=None,
        deal_id=None,
        adomain='["brand.example"]',
        bid_price_micros=4_200_000,
        price_micros=3_010_000,
        min_to_win_micros=3_000_000,
        currency="USD",
        multiplier=2.5,
        adm="<VAST/>",
        nurl=None,
        burl="https://dsp.test/bill?p=${AUCTION_PRICE}",
        play_time=ad.play_time,
        created_at=ad.created_at,
    )
    return ad, win


def apply(db: LedgerDatabase, batches: Sequence[Sequence[Operation]]) -> list[Verdict]:
    async def scenario(store: Any) -> list[Verdict]:
        verdicts: list[Verdict] = []
        for batch in batches:
            verdicts += await store.apply(batch)
        return verdicts

    return db.run(scenario)


def stored_win(db: LedgerDatabase, ident: uuid.UUID) -> dict[str, Any]:
    with db.engine.connect() as conn:
        row = (
            conn.execute(sa.select(demand_wins).where(demand_wins.c.ad_request_id == ident)).mappings().one()
        )
    return dict(row)


def test_the_win_is_stored_with_its_ad_request_and_owes_nothing_before_the_play(db: LedgerDatabase) -> None:
    ad, win = programmatic()
    assert [v.outcome for v in apply(db, [[Issue(ad, None, win)]])] == ["issued"]
    assert db.rows()[ad.id]["campaign_id"] is None
    stored = stored_win(db, ad.id)
    assert {k: stored[k] for k in ("partner", "price_micros", "multiplier", "burl")} == {
        "partner": "dsp",
        "price_micros": 3_010_000,
        "multiplier": 2.5,
        "burl": win.burl,
    }
    assert stored["bill_due_at"] is None


def test_the_first_counted_impression_makes_the_bill_due_at_its_time_and_repeats_never_move_it(
    db: LedgerDatabase,
) -> None:
    ad, win = programmatic()
    verdicts = apply(
        db,
        [
            [Issue(ad, None, win)],
            [Fire(ad.id, "impression", "wrapper", PLAY + 5), Fire(ad.id, "impression", "wrapper", PLAY + 6)],
            [Fire(ad.id, "impression", "inline", PLAY + 7), Fire(ad.id, "start", "wrapper", PLAY + 8)],
        ],
    )
    assert [v.outcome for v in verdicts[1:]] == ["counted", "duplicate", "echo", "counted"]
    assert stored_win(db, ad.id)["bill_due_at"] == PLAY + 5


def test_a_released_ad_request_never_falls_due(db: LedgerDatabase) -> None:
    ad, win = programmatic()
    verdicts = apply(
        db,
        [
            [Issue(ad, None, win)],
            [Release(ad.id, ad.account_id, PLAY)],
            [Fire(ad.id, "impression", "wrapper", PLAY)],
        ],
    )
    assert [v.outcome for v in verdicts[1:]] == ["released", "released"]
    assert stored_win(db, ad.id)["bill_due_at"] is None


def test_an_impression_after_the_expiry_is_late_and_never_falls_due(db: LedgerDatabase) -> None:
    ad, win = programmatic()
    verdicts = apply(db, [[Issue(ad, None, win)], [Fire(ad.id, "impression", "wrapper", PLAY + WINDOW + 1)]])
    assert verdicts[1].outcome == "late"
    assert stored_win(db, ad.id)["bill_due_at"] is None


def test_a_direct_ad_request_has_no_bill(db: LedgerDatabase) -> None:
    ad = record()
    apply(db, [[Issue(ad)], [Fire(ad.id, "impression", "wrapper", PLAY)]])
    with db.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(demand_wins)).scalar() == 0
