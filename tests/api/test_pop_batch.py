"""POST /api/v1/ad/pop/batch: an offline player's fires, each answered in order, counted once however often
the batch is sent, checked whole before anything is stored, and placed at their played_at."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.ids import uuid7
from adslot.storage.database import make_engine
from adslot.storage.tables import accounts, ad_requests
from tests.conftest import LiveServer, live_server
from tests.contract.support import assert_error, issue, record_of

BATCH = "/api/v1/ad/pop/batch"


@pytest.fixture(scope="module")
def live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A seeded adslot with every invalid-traffic rule on, as in production."""
    yield from live_server(tmp_path_factory.mktemp("pop-batch"), backend, ADSLOT_IVT_RULES="")


def send(http: httpx.Client, live: LiveServer, fires: Any, key: str | None = None) -> httpx.Response:
    assert live.keys
    return http.post(
        live.url + BATCH, json={"fires": fires}, headers={"Ssp-Key": key or live.keys.production}
    )


def results(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [item["result"] for item in response.json()["data"]["results"]]


def fresh(http: httpx.Client, live: LiveServer) -> str:
    """A filled ad request playing now."""
    return str(issue(http, live, play_time=int(time.time()))["ad_request_uuid"])


def test_a_batch_counts_each_fire_and_sent_again_counts_nothing_twice(
    live: LiveServer, http: httpx.Client
) -> None:
    now = int(time.time())
    uuids = [fresh(http, live) for _ in range(3)]
    fires = [{"ad_request_uuid": u, "event": "impression", "played_at": now} for u in uuids]
    assert results(send(http, live, fires)) == ["counted"] * 3
    again = send(http, live, fires)
    assert results(again) == ["duplicate"] * 3
    assert again.json()["data"]["counts"]["duplicate"] == 3
    for u in uuids:
        record = record_of(http, live, u)
        assert record["events"]["impression"] == now and record["plays"] == 1
        assert record["duplicate_count"] == 1


def test_each_item_gets_its_own_answer_in_order(live: LiveServer, http: httpx.Client) -> None:
    now = int(time.time())
    first, second = fresh(http, live), fresh(http, live)
    fires = [
        {"ad_request_uuid": first, "event": "impression", "played_at": now},
        {"ad_request_uuid": str(uuid7()), "event": "impression", "played_at": now},
        {"ad_request_uuid": first, "event": "impression", "played_at": now},
        {"ad_request_uuid": second, "event": "impression", "played_at": now - 73 * 3600},
        {"ad_request_uuid": second, "event": "start", "played_at": now - 600},
        {"ad_request_uuid": first, "event": "impression", "played_at": now, "layer": "inline"},
    ]
    answer = send(http, live, fires)
    items = answer.json()["data"]["results"]
    assert [item["result"] for item in items] == [
        "counted",
        "unknown",
        "duplicate",
        "late",
        "invalid",
        "echo",
    ]
    assert [item["index"] for item in items] == list(range(6))
    assert "reason" not in items[0] and "72 h" in items[3]["reason"] and "play_time" in items[4]["reason"]
    assert items[5]["layer"] == "inline"
    assert record_of(http, live, second)["events"]["start"] is None


def test_an_empty_batch_is_refused(live: LiveServer, http: httpx.Client) -> None:
    assert_error(send(http, live, []), 400, "empty_batch", "fires")


def test_more_than_1000_fires_are_refused(live: LiveServer, http: httpx.Client) -> None:
    fire = {"ad_request_uuid": str(uuid7()), "event": "impression", "played_at": int(time.time())}
    assert_error(send(http, live, [fire] * 1001), 413, "batch_too_large", "fires")


def test_a_bad_fire_among_good_ones_refuses_the_batch_and_stores_nothing(
    live: LiveServer, http: httpx.Client
) -> None:
    now = int(time.time())
    good = fresh(http, live)
    fires = [
        {"ad_request_uuid": good, "event": "impression", "played_at": now},
        {"ad_request_uuid": good, "event": "start", "played_at": now},
        {"ad_request_uuid": good, "event": "firstQuartile", "played_at": now},
        {"ad_request_uuid": good, "event": "halfway", "played_at": now},
    ]
    assert_error(send(http, live, fires), 400, "unknown_event", "fires[3].event")
    record = record_of(http, live, good)
    assert record["events"]["impression"] is None and record["events"]["start"] is None
    assert_error(
        send(http, live, [fires[0], {"event": "start"}]), 400, "missing_field", "fires[1].ad_request_uuid"
    )
    assert_error(send(http, live, [fires[0], "x"]), 400, "invalid_type", "fires[1]")
    assert record_of(http, live, good)["events"]["impression"] is None


def test_a_played_at_in_the_future_is_refused(live: LiveServer, http: httpx.Client) -> None:
    fire = {"ad_request_uuid": fresh(http, live), "event": "impression", "played_at": int(time.time()) + 3600}
    assert_error(send(http, live, [fire]), 400, "played_at_in_future", "fires[0].played_at")
    assert_error(send(http, live, [{**fire, "played_at": "soon"}]), 400, "invalid_type", "fires[0].played_at")


def test_a_fire_older_than_the_upload_window_is_late(live: LiveServer, http: httpx.Client) -> None:
    old = int(time.time()) - 72 * 3600 - 60
    ident = offline_ad_request(live, old)
    answer = send(http, live, [{"ad_request_uuid": ident, "event": "impression", "played_at": old + 5}])
    assert results(answer) == ["late"]
    assert record_of(http, live, ident)["events"]["impression"] is None


def offline_ad_request(
    live: LiveServer, play_time: int, account: str = "acct", screen_id: str | None = None
) -> str:
    """An ad request stored `play_time` ago, as its player asked for it before it went offline."""
    engine = make_engine(live.settings.environment("production"))
    ident = uuid7()
    with engine.begin() as conn:
        account_id = conn.execute(sa.select(accounts.c.id).where(accounts.c.name == account)).scalar_one()
        conn.execute(
            sa.insert(ad_requests).values(
                id=ident,
                account_id=account_id,
                venue_id="venue-1",
                screen_id=screen_id,
                play_time=play_time,
                created_at=play_time - 60,
                expires_at=play_time + live.settings.play_window_seconds,
                campaign_id=live.extra["campaign_id"],
                creative_id=live.extra["creative_id"],
                duration_seconds=15,
            )
        )
    engine.dispose()
    return str(ident)


def test_an_offline_fire_counts_in_the_hour_it_was_played(live: LiveServer, http: httpx.Client) -> None:
    now = int(time.time())
    hour = now - now % 3600 - 5 * 3600
    ident = offline_ad_request(live, hour + 600, screen_id="offline-screen")
    played = [
        {"ad_request_uuid": ident, "event": "impression", "played_at": hour + 610},
        {"ad_request_uuid": ident, "event": "start", "played_at": hour + 610},
        {"ad_request_uuid": ident, "event": "complete", "played_at": hour + 625},
    ]
    assert results(send(http, live, played)) == ["counted"] * 3
    record = record_of(http, live, ident)
    assert record["events"]["impression"] == hour + 610 and record["events"]["complete"] == hour + 625
    assert live.keys
    report = http.get(
        live.url + "/api/v1/reports/delivery",
        params={
            "from": hour,
            "to": now - now % 3600 + 3600,
            "group_by": "hour",
            "timezone": "UTC",
            "venue_id": "venue-1",
            "screen_id": "offline-screen",
        },
        headers={"Ssp-Key": live.keys.production_admin},
    )
    assert report.status_code == 200, report.text
    rows = {row["hour"]: row for row in report.json()["data"]["rows"]}
    played_hour = time.strftime("%Y-%m-%dT%H:00:00+00:00", time.gmtime(hour))
    assert rows[played_hour]["plays"] == 1 and rows[played_hour]["completes"] == 1
    assert {name: row["plays"] for name, row in rows.items()} == {played_hour: 1}  # not in the arrival hour
    playlog = http.get(
        live.url + "/api/v1/reports/playlog",
        params={"venue_id": "venue-1", "from": hour, "to": hour + 3600},
        headers={"Ssp-Key": live.keys.production_admin},
    )
    assert playlog.status_code == 200, playlog.text
    (row,) = [r for r in playlog.json()["data"]["rows"] if r["ad_request_uuid"] == ident]
    assert row["impression_at"] == hour + 610


def test_another_accounts_ad_request_is_unknown_to_this_key(live: LiveServer, http: httpx.Client) -> None:
    now = int(time.time())
    theirs = offline_ad_request(live, now, account="other")
    fire = {"ad_request_uuid": theirs, "event": "impression", "played_at": now}
    assert results(send(http, live, [fire])) == ["unknown"]
    assert live.keys
    assert results(send(http, live, [fire], key=live.keys.other_account)) == ["counted"]


def test_fifty_identical_batches_at_once_count_each_fire_once(live: LiveServer, http: httpx.Client) -> None:
    now = int(time.time())
    uuids = [fresh(http, live) for _ in range(5)]
    fires = [
        {"ad_request_uuid": u, "event": e, "played_at": now} for u in uuids for e in ("impression", "start")
    ]

    def one(_: int) -> list[str]:
        with httpx.Client(timeout=60) as client:
            return results(send(client, live, fires))

    with ThreadPoolExecutor(max_workers=50) as pool:
        answers = list(pool.map(one, range(50)))
    per_item = [Counter(answer[i] for answer in answers) for i in range(len(fires))]
    assert all(counts == {"counted": 1, "duplicate": 49} for counts in per_item), per_item
    for u in uuids:
        record = record_of(http, live, u)
        assert record["plays"] == 1 and record["duplicate_count"] == 98


def test_the_batch_needs_the_ad_request_key(live: LiveServer, http: httpx.Client) -> None:
    fire = {"ad_request_uuid": str(uuid.uuid4()), "event": "impression", "played_at": int(time.time())}
    response = http.post(live.url + BATCH, json={"fires": [fire]})
    assert_error(response, 401, "missing_api_key", "Ssp-Key")
