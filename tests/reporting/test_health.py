"""Integration health: each go-live criterion at its threshold's edge (pure), the counts integration_health
reads from rows written directly (exact times: late PoPs, expiries, hours of key_stats), and from a player
that asks for ads and fires pixels through the real app with two keys of one account (SQLite and
PostgreSQL)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.auth.keys import LIVE_PREFIX, hash_key
from adslot.auth.repository import create_key, revoke_key
from adslot.catalog import bump_version
from adslot.ledger.records import SETTLE_GRACE_SECONDS
from adslot.reporting.health import (
    DAY,
    HOUR,
    MIN_SAMPLE,
    VOLUME_MIN_HOURS,
    Counts,
    Criterion,
    IntegrationHealth,
    assess,
    health_window,
    integration_health,
)
from adslot.storage.database import make_engine
from adslot.storage.tables import accounts, api_keys
from tests.conftest import PROD_VENUE, LiveServer, eventually
from tests.contract.support import fire
from tests.reporting.support import ad_request, insert, key_stat, played, utc

NOW = utc("2026-10-20T12:30")
CURRENT_HOUR = utc("2026-10-20T12:00")
LAST_HOUR = CURRENT_HOUR - HOUR
QUARTILES = ("start", "first_quartile", "midpoint", "third_quartile", "complete")


# --- the criteria, from counts ---------------------------------------------------------------------------


def volume(last: int, mean: int, hours: int = VOLUME_MIN_HOURS) -> Counts:
    return Counts(last_hour_requests=last, baseline_requests=mean * hours, baseline_hours=hours)


EDGES = {
    "played": (Counts(played=1900, expired=100), Counts(played=1899, expired=101)),
    "pop_on_time": (Counts(played=100, on_time=95), Counts(played=100, on_time=94)),
    "quartiles": (Counts(played=100, all_quartiles=90), Counts(played=100, all_quartiles=89)),
    "volume": (volume(50, 100), volume(49, 100)),
}
"""Per criterion: counts exactly at its threshold, and counts one ad request past it."""


@pytest.mark.parametrize("name", EDGES)
def test_each_criterion_is_met_at_its_threshold_and_not_met_one_ad_request_short(name: str) -> None:
    at, short = EDGES[name]
    assert getattr(assess(at), name).met is True
    assert getattr(assess(short), name).met is False


def test_volume_is_met_up_to_twice_the_mean_and_not_met_above() -> None:
    assert assess(volume(200, 100)).volume.met is True
    assert assess(volume(201, 100)).volume.met is False


def test_volume_is_the_last_hour_against_the_mean_of_the_hours() -> None:
    criterion = assess(Counts(last_hour_requests=30, baseline_requests=1440, baseline_hours=48)).volume
    assert (criterion.value, criterion.numerator, criterion.denominator) == (1.0, 30, 30.0)
    assert (criterion.low, criterion.high) == (0.5, 2.0)


def test_a_released_ad_request_is_decided_and_counts_as_not_played() -> None:
    assert assess(Counts(played=95, released=5)).played.met is True
    criterion = assess(Counts(played=95, released=5, expired=1)).played
    assert (criterion.numerator, criterion.denominator, criterion.met) == (95, 101, False)


def test_the_fill_share_is_shown_but_never_judged() -> None:
    for fills in (0, 50, 1000):
        criterion = assess(Counts(requests=1000, fills=fills)).fill
        assert criterion.value == fills / 1000
        assert (criterion.low, criterion.high, criterion.met) == (None, None, None)


def test_a_share_of_fewer_ad_requests_than_the_minimum_sample_is_shown_but_not_judged() -> None:
    small = assess(Counts(played=MIN_SAMPLE - 1, on_time=0, all_quartiles=0, expired=0))
    assert [small.played.met, small.pop_on_time.met, small.quartiles.met] == [None, None, None]
    assert small.pop_on_time.value == 0.0
    enough = assess(Counts(played=MIN_SAMPLE, on_time=0, all_quartiles=0))
    assert [enough.played.met, enough.pop_on_time.met, enough.quartiles.met] == [True, False, False]


def test_volume_on_less_than_a_day_of_hours_is_shown_but_not_judged() -> None:
    short = assess(volume(10, 100, hours=VOLUME_MIN_HOURS - 1)).volume
    assert (short.value, short.met) == (0.1, None)
    assert assess(volume(10, 100)).volume.met is False


def test_without_traffic_no_criterion_has_a_value_or_a_judgement() -> None:
    criteria = assess(Counts())
    assert [(c.name, c.value, c.met) for c in criteria] == [
        ("fill", None, None),
        ("played", None, None),
        ("pop_on_time", None, None),
        ("quartiles", None, None),
        ("volume", None, None),
    ]
    assert criteria.met is None


HEALTHY = Counts(
    requests=5000,
    fills=10,  # a low fill share fails nothing: it is the demand's, not the player's
    played=1000,
    on_time=1000,
    all_quartiles=1000,
    last_hour_requests=100,
    baseline_requests=2400,
    baseline_hours=24,
)


@pytest.mark.parametrize(
    ("counts", "met"),
    [
        (HEALTHY, True),
        (dataclasses.replace(HEALTHY, all_quartiles=899), False),
        (dataclasses.replace(HEALTHY, baseline_hours=23), None),
    ],
    ids=["every-criterion-met", "one-not-met", "one-not-judged"],
)
def test_an_integration_meets_go_live_only_when_every_judged_criterion_is_met(
    counts: Counts, met: bool | None
) -> None:
    assert assess(counts).met is met


def test_the_window_starts_at_the_utc_hour_the_given_days_before_the_current_one() -> None:
    window = health_window(NOW, 7)
    assert (window.start, window.current_hour, window.last_hour) == (
        CURRENT_HOUR - 7 * DAY,
        CURRENT_HOUR,
        LAST_HOUR,
    )
    with pytest.raises(ValueError, match="at least a day"):
        health_window(NOW, 0)


# --- integration_health on rows written directly ---------------------------------------------------------


@pytest.fixture
def make_key(db: sa.Engine) -> Callable[..., int]:
    """Makes keys in the emptied database, which holds no other key."""
    with db.begin() as conn:
        conn.execute(sa.delete(api_keys))
        conn.execute(sa.delete(accounts))

    def make(account: str = "acme", scopes: str = "ad_request", label: str | None = None) -> int:
        with db.begin() as conn:
            return create_key(conn, account=account, prefix=LIVE_PREFIX, scopes=scopes, label=label)[1].id

    return make


def health_of(engine: sa.Engine, now: int = NOW) -> dict[int, IntegrationHealth]:
    with engine.connect() as conn:
        return {health.key_id: health for health in integration_health(conn, now)}


def test_a_pop_two_hours_after_play_counts_as_played_but_not_within_the_hour(
    db: sa.Engine, make_key: Callable[..., int]
) -> None:
    key = make_key()
    at = NOW - 3 * HOUR
    late = {"expires_at": at + 3 * HOUR}  # a play window long enough to take a PoP 2 hours late
    insert(
        db,
        [
            played(at, key_id=key),
            ad_request(at, key_id=key, impression_at=at + HOUR, **late),  # an hour exactly: on time
            ad_request(at, key_id=key, impression_at=at + HOUR + 1, **late),
            ad_request(at, key_id=key, impression_at=at + 2 * HOUR, **late),
        ],
    )
    health = health_of(db)[key]
    assert (health.counts.played, health.counts.on_time) == (4, 2)
    assert health.criteria.played.value == 1.0
    assert health.criteria.pop_on_time.value == 0.5


def test_only_played_ad_requests_with_all_five_video_events_count_as_complete(
    db: sa.Engine, make_key: Callable[..., int]
) -> None:
    key = make_key()
    at = NOW - HOUR
    rows = [played(at, *QUARTILES, key_id=key), played(at, *QUARTILES[:4], key_id=key)]
    rows += [played(at, *(q for q in QUARTILES if q != event), key_id=key) for event in QUARTILES[:4]]
    rows.append(ad_request(at, key_id=key, **{f"{q}_at": at for q in QUARTILES}))  # no impression: unplayed
    insert(db, rows)
    counts = health_of(db)[key].counts
    assert (counts.played, counts.all_quartiles) == (6, 1)


def test_an_unplayed_ad_request_is_decided_once_its_expiry_and_the_settle_grace_have_passed(
    db: sa.Engine, make_key: Callable[..., int]
) -> None:
    """Until then a fire received in time may still be committing: it is neither played nor expired."""
    key = make_key()
    at = NOW - HOUR
    expiry = at + 900
    insert(
        db,
        [
            played(at, key_id=key),
            ad_request(at, key_id=key),  # unplayed, unsettled, expiring at `expiry`
            ad_request(at, key_id=key, settled_at=expiry + 61, settle_reason="expired"),
            ad_request(at, key_id=key, settled_at=at + 5, settle_reason="released"),
        ],
    )
    pending = health_of(db, now=expiry + SETTLE_GRACE_SECONDS)[key].counts
    assert (pending.played, pending.released, pending.expired, pending.decided) == (1, 1, 1, 3)
    decided = health_of(db, now=expiry + SETTLE_GRACE_SECONDS + 1)[key].counts
    assert (decided.played, decided.released, decided.expired, decided.decided) == (1, 1, 2, 4)
    assert health_of(db, now=expiry + SETTLE_GRACE_SECONDS + 1)[key].criteria.played.value == 0.25


def test_ad_requests_before_the_window_or_without_a_key_count_for_no_key(
    db: sa.Engine, make_key: Callable[..., int]
) -> None:
    key, other = make_key(), make_key()
    start = health_window(NOW).start
    insert(
        db,
        [
            played(start - 1, key_id=key),
            played(start, key_id=key),
            played(NOW + 1800, key_id=key),  # asked for ahead of its play_time: in the window
            played(NOW - HOUR),  # before keys were recorded
        ],
        by_key=[
            key_stat(key, start - HOUR, 7, 7),
            key_stat(key, start, 2, 1),
            key_stat(key, CURRENT_HOUR, 1, 1),
        ],
    )
    found = health_of(db)
    assert (found[key].counts.requests, found[key].counts.fills, found[key].counts.played) == (3, 2, 2)
    assert found[other].counts == Counts()


def test_volume_compares_the_last_complete_hour_with_the_mean_hour_since_the_keys_first_traffic(
    db: sa.Engine, make_key: Callable[..., int]
) -> None:
    """Hours without traffic after the first count as zeros; the current, incomplete hour and the hours
    before the window count for nothing."""
    steady, new = make_key(), make_key()
    hours = [LAST_HOUR - n * HOUR for n in range(1, 24) if n != 5]
    insert(
        db,
        [],
        by_key=[
            *(key_stat(steady, hour, 100) for hour in hours),
            key_stat(steady, LAST_HOUR, 40),
            key_stat(steady, CURRENT_HOUR, 500),
            key_stat(steady, health_window(NOW).start - HOUR, 1000),
            key_stat(new, LAST_HOUR - HOUR, 10),
            key_stat(new, LAST_HOUR, 10),
        ],
    )
    found = health_of(db)
    counts = found[steady].counts
    assert (counts.requests, counts.last_hour_requests) == (22 * 100 + 40 + 500, 40)
    assert (counts.baseline_requests, counts.baseline_hours) == (22 * 100 + 40, 24)
    criterion: Criterion = found[steady].criteria.volume
    assert criterion.value == pytest.approx(40 / (2240 / 24))
    assert criterion.met is False
    assert (found[new].counts.baseline_hours, found[new].criteria.volume.value) == (2, 1.0)
    assert found[new].criteria.volume.met is None, "two hours are too short a history to judge"


def test_keys_that_may_ask_are_listed_and_revoked_ones_only_with_traffic_in_the_window(
    db: sa.Engine, make_key: Callable[..., int]
) -> None:
    asking = make_key("acme", label="lobby players")
    revoked_busy = make_key("acme")
    revoked_quiet = make_key("globex")
    make_key("acme", scopes="admin")  # manages, never asks for ads: not an integration
    admin_and_asking = make_key("globex", scopes="admin,ad_request")
    with db.begin() as conn:
        revoke_key(conn, revoked_busy)
        revoke_key(conn, revoked_quiet)
    start = health_window(NOW).start
    insert(db, [], by_key=[key_stat(revoked_busy, start, 3), key_stat(revoked_quiet, start - HOUR, 3)])
    with db.connect() as conn:
        found = integration_health(conn, NOW)
        account_ids = dict(conn.execute(sa.select(accounts.c.name, accounts.c.id)).all())
        prefixes = dict(conn.execute(sa.select(api_keys.c.id, api_keys.c.prefix)).all())
    assert [h.key_id for h in found] == [asking, revoked_busy, admin_and_asking]
    first, busy, _ = found
    assert (first.account, first.account_id, first.label) == ("acme", account_ids["acme"], "lobby players")
    assert first.prefix == prefixes[asking] and first.prefix.startswith(LIVE_PREFIX)
    assert first.revoked_at is None and busy.revoked_at is not None
    assert busy.counts.requests == 3


# --- integration_health on what a player did through the real app ----------------------------------------


def key_id_of(engine: sa.Engine, key: str) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(sa.select(api_keys.c.id).where(api_keys.c.key_hash == hash_key(key))).scalar_one()
        )


EVENTS = ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")


@pytest.fixture(scope="module")
def traffic(live: LiveServer) -> Iterator[dict[str, Any]]:
    """Two keys of one account: A asks for four ads (plays one with all five video events, plays one with
    the impression only, releases one, leaves one unplayed) and twice for none; B asks for one ad, left
    unplayed, and once for none."""
    assert live.keys
    engine = make_engine(live.settings.environment("production"))
    with engine.begin() as conn:
        key_b, _ = create_key(conn, account="acct", prefix=LIVE_PREFIX, scopes="ad_request")
        bump_version(conn)
    key_a = live.keys.production
    at = int(time.time()) + 120
    with httpx.Client(timeout=30) as http:
        probe = f"{live.url}/api/v1/ad/request/{uuid.uuid4()}"
        assert eventually(lambda: http.get(probe, headers={"Ssp-Key": key_b}).status_code == 404)

        def ask(key: str, venue: str, status: int) -> str | None:
            answer = http.post(
                f"{live.url}/api/v1/ad/request",
                headers={"Ssp-Key": key},
                json={"venue_id": venue, "play_time": at},
            )
            assert answer.status_code == status, answer.text
            return str(answer.json()["data"]["ad_request_uuid"]) if status == 200 else None

        full, impression, released, _ = (ask(key_a, PROD_VENUE, 200) for _ in range(4))
        for _ in range(2):
            ask(key_a, "venue-empty", 204)
        ask(key_b, PROD_VENUE, 200)
        ask(key_b, "venue-empty", 204)
        for uuid_text, events in ((full, ("impression", *EVENTS)), (impression, ("impression",))):
            assert uuid_text is not None
            for event in events:
                assert fire(http, live.url, uuid_text, event).status_code == 200
        answer = http.post(f"{live.url}/api/v1/ad/request/{released}/release", headers={"Ssp-Key": key_a})
        assert answer.json()["data"]["result"] == "released", answer.text
    ids = {"a": key_id_of(engine, key_a), "b": key_id_of(engine, key_b)}
    yield {"engine": engine, "ids": ids, "expired_at": at + live.settings.play_window_seconds}
    engine.dispose()


def live_health(traffic: dict[str, Any], now: int) -> tuple[IntegrationHealth, IntegrationHealth]:
    found = health_of(traffic["engine"], now)
    return found[traffic["ids"]["a"]], found[traffic["ids"]["b"]]


def test_an_ad_request_and_its_pixels_count_under_the_key_that_asked_not_another_key_of_its_account(
    traffic: dict[str, Any],
) -> None:
    a, b = live_health(traffic, int(time.time()))
    assert a.account == b.account == "acct"
    assert (a.counts.fills, a.counts.played, a.counts.on_time, a.counts.all_quartiles) == (4, 2, 2, 1)
    assert (a.counts.released, a.counts.expired) == (1, 0), "the unplayed one may still play"
    assert (b.counts.fills, b.counts.played, b.counts.on_time, b.counts.all_quartiles) == (1, 0, 0, 0)
    assert (b.counts.released, b.counts.expired) == (0, 0)
    assert a.criteria.quartiles.value == 0.5
    assert a.criteria.played.value == pytest.approx(2 / 3)
    assert b.criteria.played.value is None


def test_a_request_answered_with_no_ad_counts_as_a_request_not_a_fill(traffic: dict[str, Any]) -> None:
    a, b = live_health(traffic, int(time.time()))
    assert (a.counts.requests, a.counts.fills) == (6, 4)
    assert (b.counts.requests, b.counts.fills) == (2, 1)
    assert a.criteria.fill.value == pytest.approx(4 / 6)


def test_an_unplayed_ad_request_counts_against_its_key_once_expired(traffic: dict[str, Any]) -> None:
    a, b = live_health(traffic, traffic["expired_at"] + SETTLE_GRACE_SECONDS + 1)
    assert (a.counts.decided, a.counts.expired, a.criteria.played.value) == (4, 1, 0.5)
    assert (b.counts.decided, b.counts.expired, b.criteria.played.value) == (1, 1, 0.0)
