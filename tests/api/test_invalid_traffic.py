"""Invalid traffic end to end: live pixels the rules flag are answered as counted ones (the player learns
nothing), kept with their reason, never plays, and counted per reason in the delivery report (JSON and CSV).
The client is named by X-Forwarded-For, which adslot trusts from its loopback proxy here, and only there: on
either lane, a peer that ADSLOT_TRUSTED_PROXIES does not name is the client, whatever header it sends."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from uuid import UUID

import httpx
import pytest
import sqlalchemy as sa

from adslot.ledger.ivt import network_key
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, invalid_fires
from tests.conftest import PROD_VENUE, LiveServer, live_server

SCREEN = "ivt-screen"
ASGI_AD_REQUEST = "/api/v1/ad/request?%66ormat=json"
ASGI_IMPRESSION = "/%61pi/v1/ad/callback/"
"""The ad request and the impression pixel, percent-escaped: the hot lane declines them and Litestar answers
them through ASGI."""


@pytest.fixture(scope="module")
def live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    rules = {"ADSLOT_IVT_RULES": "", "ADSLOT_TRUSTED_PROXIES": "127.0.0.1"}
    yield from live_server(tmp_path_factory.mktemp("ivt"), backend, **rules)


@pytest.fixture(scope="module")
def untrusting(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server that trusts no proxy: the loopback peer is every request's client."""
    yield from live_server(tmp_path_factory.mktemp("ivt-untrusting"), backend, ADSLOT_IVT_RULES="")


def ad_request(http: httpx.Client, live: LiveServer, client: str) -> str:
    assert live.keys
    answer = http.post(
        live.url + "/api/v1/ad/request",
        headers={"Ssp-Key": live.keys.production, "X-Forwarded-For": client},
        json={"venue_id": PROD_VENUE, "screen_id": SCREEN, "play_time": int(time.time())},
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["data"]["ad_request_uuid"])


def pixel(http: httpx.Client, live: LiveServer, uuid: str, event: str, client: str) -> str:
    path = "/api/v1/ad/callback/" if event == "impression" else "/api/v1/ad/tracking/video/"
    params = {"ad_request_uuid": uuid} if event == "impression" else {"ad_request_uuid": uuid, "event": event}
    answer = http.get(live.url + path, params=params, headers={"X-Forwarded-For": f"10.9.9.9, {client}"})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["data"]["result"])


def record(http: httpx.Client, live: LiveServer, uuid: str) -> dict[str, object]:
    assert live.keys
    answer = http.get(live.url + f"/api/v1/ad/request/{uuid}", headers={"Ssp-Key": live.keys.production})
    assert answer.status_code == 200, answer.text
    data: dict[str, object] = answer.json()["data"]
    return data


def test_flagged_fires_answer_counted_are_kept_with_their_reason_and_reported_never_played(
    live: LiveServer, http: httpx.Client
) -> None:
    foreign = ad_request(http, live, "203.0.113.5")
    assert pixel(http, live, foreign, "impression", "198.51.100.5") == "counted"  # as a counted fire answers
    assert record(http, live, foreign)["plays"] == 0
    fast = ad_request(http, live, "203.0.113.5")
    assert pixel(http, live, fast, "impression", "203.0.7.7") == "counted"  # the same /16: home
    assert pixel(http, live, fast, "start", "203.0.7.7") == "counted"
    assert pixel(http, live, fast, "complete", "203.0.7.7") == "counted"  # 15 s creative, same second
    events = record(http, live, fast)["events"]
    assert (
        isinstance(events, dict) and events["impression"] and events["start"] and events["complete"] is None
    )
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        stored = {(str(r.ad_request_id), r.event, r.reason) for r in conn.execute(sa.select(invalid_fires))}
    engine.dispose()
    assert stored == {(foreign, "impression", "foreign_network"), (fast, "complete", "too_fast")}

    assert live.keys
    now = int(time.time())
    params = {
        "from": now - now % 3600,
        "to": now - now % 3600 + 3600,
        "screen_id": SCREEN,
        "venue_id": PROD_VENUE,
    }
    headers = {"Ssp-Key": live.keys.production_admin}
    report = http.get(live.url + "/api/v1/reports/delivery", params=params, headers=headers)
    assert report.status_code == 200, report.text
    totals = report.json()["data"]["totals"]
    assert (totals["fills"], totals["plays"], totals["completes"]) == (2, 1, 0)
    assert totals["invalid"] == {"too_fast": 1, "out_of_order": 0, "foreign_network": 1, "burst": 0}
    as_csv = http.get(
        live.url + "/api/v1/reports/delivery", params={**params, "format": "csv"}, headers=headers
    )
    assert as_csv.status_code == 200, as_csv.text
    header, *rows = list(csv.reader(io.StringIO(as_csv.text)))
    (row,) = rows
    figures = dict(zip(header, row, strict=True))
    assert (figures["invalid_too_fast"], figures["invalid_foreign_network"], figures["plays"]) == (
        "1",
        "1",
        "1",
    )


def asgi_ad_request(http: httpx.Client, live: LiveServer, forwarded: str) -> tuple[str, object]:
    """An ad request through the ASGI lane with `forwarded` as X-Forwarded-For: its uuid and the network it
    was stored with."""
    assert live.keys
    answer = http.post(
        live.url + ASGI_AD_REQUEST,
        headers={"Ssp-Key": live.keys.production, "X-Forwarded-For": forwarded},
        json={"venue_id": PROD_VENUE, "screen_id": "ivt-asgi-screen", "play_time": int(time.time())},
    )
    assert answer.status_code == 200, answer.text
    uuid = str(answer.json()["data"]["ad_request_uuid"])
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        network = conn.scalar(sa.select(ad_requests.c.source_network).where(ad_requests.c.id == UUID(uuid)))
    engine.dispose()
    return uuid, network


def asgi_impression_plays(http: httpx.Client, live: LiveServer, uuid: str, forwarded: str) -> object:
    """Fire the impression through the ASGI lane with `forwarded` as X-Forwarded-For; the plays it made."""
    answer = http.get(
        live.url + ASGI_IMPRESSION, params={"ad_request_uuid": uuid}, headers={"X-Forwarded-For": forwarded}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"]["result"] == "counted"
    return record(http, live, uuid)["plays"]


def test_a_request_through_asgi_is_the_peers_unless_a_trusted_proxy_forwards_it(
    live: LiveServer, untrusting: LiveServer, http: httpx.Client
) -> None:
    """A loopback peer that is no trusted proxy cannot name its network by X-Forwarded-For on the ASGI lane
    (uvicorn's `client` follows that header from 127.0.0.1): its ad request's network and its fire's are
    the peer's (loopback: unknown, so no fire of it is foreign). Behind a trusted proxy, the header's
    address is the client's on the ASGI lane as on the hot lane."""
    forged, network = asgi_ad_request(http, untrusting, "203.0.113.5")
    assert network is None
    assert asgi_impression_plays(http, untrusting, forged, "198.51.100.5") == 1
    proxied, network = asgi_ad_request(http, live, "10.9.9.9, 203.0.113.5")
    assert network == network_key("203.0.113.5")
    assert asgi_impression_plays(http, live, proxied, "10.9.9.9, 198.51.100.5") == 0  # foreign_network
    home, _ = asgi_ad_request(http, live, "203.0.113.5")
    assert asgi_impression_plays(http, live, home, "10.9.9.9, 203.0.7.7") == 1  # the same /16
