"""Invalid traffic end to end: live pixels the rules flag are answered as counted ones (the player learns
nothing), kept with their reason, never plays, and counted per reason in the delivery report (JSON and CSV).
The client is named by X-Forwarded-For, which adslot trusts from its loopback proxy here."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator

import httpx
import pytest
import sqlalchemy as sa

from adslot.storage.database import make_engine
from adslot.storage.tables import invalid_fires
from tests.conftest import PROD_VENUE, LiveServer, live_server

SCREEN = "ivt-screen"


@pytest.fixture(scope="module")
def live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    rules = {"ADSLOT_IVT_RULES": "", "ADSLOT_TRUSTED_PROXIES": "127.0.0.1"}
    yield from live_server(tmp_path_factory.mktemp("ivt"), backend, **rules)


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
