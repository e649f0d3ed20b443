"""The reporting API on a live server (SQLite and PostgreSQL): figures made by a player through the real
endpoints (ad requests, impression and quartile pixels), then read back as delivery reports and play logs in
JSON and CSV; DST days and streamed CSV on rows written directly; every bad parameter's exact error; the
admin permission; and the operations in the OpenAPI document."""

from __future__ import annotations

import csv
import io
import time
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests
from tests.conftest import PROD_VENUE, LiveServer
from tests.reporting.support import played, utc

DELIVERY = "/api/v1/reports/delivery"
PLAYLOG = "/api/v1/reports/playlog"
FIRES: list[list[str]] = [
    ["impression", "impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"],
    ["impression", "start", "firstQuartile", "midpoint"],
    ["impression", "start"],
    [],
    ["release"],  # the player gives this one back
]
NO_FILLS = 2  # ad requests at venue-empty, where nothing can play


def admin(live: LiveServer) -> dict[str, str]:
    assert live.keys
    return {"Ssp-Key": live.keys.production_admin}


def fire(http: httpx.Client, live: LiveServer, uuid: str, event: str) -> None:
    assert live.keys
    if event == "release":
        answer = http.post(
            f"{live.url}/api/v1/ad/request/{uuid}/release", headers={"Ssp-Key": live.keys.production}
        )
        assert answer.json()["data"]["result"] == "released", answer.text
        return
    if event == "impression":
        url = f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}"
    else:
        url = f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid={uuid}&event={event}"
    assert http.get(url).status_code == 200


@pytest.fixture(scope="module")
def delivered(live: LiveServer) -> dict[str, Any]:
    """Five filled ad requests at venue-1 for one play_time, the player firing FIRES[i] for the i-th, and
    NO_FILLS unfilled ones at venue-empty."""
    assert live.keys
    at = int(time.time()) + 120
    uuids = []
    with httpx.Client(timeout=30) as http:
        for events in FIRES:
            answer = http.post(
                f"{live.url}/api/v1/ad/request",
                headers={"Ssp-Key": live.keys.production},
                json={"venue_id": PROD_VENUE, "play_time": at},
            )
            assert answer.status_code == 200, answer.text
            uuid = answer.json()["data"]["ad_request_uuid"]
            uuids.append(uuid)
            for event in events:
                fire(http, live, uuid, event)
        for _ in range(NO_FILLS):
            answer = http.post(
                f"{live.url}/api/v1/ad/request",
                headers={"Ssp-Key": live.keys.production},
                json={"venue_id": "venue-empty", "play_time": at},
            )
            assert answer.status_code == 204, answer.text
    start = at - at % 3600 - 3600
    return {"play_time": at, "uuids": uuids, "from": start, "to": start + 4 * 3600}


def get(http: httpx.Client, live: LiveServer, path: str, **params: Any) -> httpx.Response:
    return http.get(f"{live.url}{path}", params=params, headers=admin(live))


def test_delivery_by_campaign_counts_what_the_player_fired(
    live: LiveServer, http: httpx.Client, delivered: dict[str, Any]
) -> None:
    answer = get(
        http, live, DELIVERY, **{"from": delivered["from"], "to": delivered["to"], "venue_id": PROD_VENUE}
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert body["status"] == 200
    data = body["data"]
    assert (data["from"], data["to"], data["timezone"], data["group_by"]) == (
        delivered["from"],
        delivered["to"],
        "UTC",
        ["campaign"],
    )
    assert data["filters"] == {"campaign_id": None, "venue_id": PROD_VENUE, "screen_id": None}
    expected = {
        "campaign_id": live.extra["campaign_id"],
        "requests": None,
        "fills": 5,
        "fill_rate": None,
        "plays": 3,
        "impressions": 3.0,
        "starts": 3,
        "first_quartiles": 2,
        "midpoints": 2,
        "third_quartiles": 1,
        "completes": 1,
        "completion_rate": 0.3333,
        "late": 0,
        "duplicates": 1,
        "expired": 0,
        "released": 1,
        "invalid": {"too_fast": 0, "out_of_order": 0, "foreign_network": 0, "burst": 0},
        "direct_plays": 3,
        "programmatic_plays": 0,
    }
    assert data["rows"] == [expected]
    assert data["totals"] == {k: v for k, v in expected.items() if k != "campaign_id"}


def test_delivery_by_creative_venue_and_local_hour(
    live: LiveServer, http: httpx.Client, delivered: dict[str, Any]
) -> None:
    answer = get(
        http,
        live,
        DELIVERY,
        **{
            "from": delivered["from"],
            "to": delivered["to"],
            "group_by": "creative,venue,hour",
            "timezone": "Asia/Kolkata",
            "campaign_id": live.extra["campaign_id"],
        },
    )
    assert answer.status_code == 200, answer.text
    (row,) = answer.json()["data"]["rows"]
    at = delivered["play_time"]
    local_hour = at - (at + 19800) % 3600  # Kolkata's hours start at half past UTC hours
    hour = time.strftime("%Y-%m-%dT%H:00:00+05:30", time.gmtime(local_hour + 19800))
    assert (row["creative_id"], row["venue_id"], row["hour"]) == (live.extra["creative_id"], PROD_VENUE, hour)
    assert (row["fills"], row["plays"], row["completes"], row["released"]) == (5, 3, 1, 1)
    assert "campaign_id" not in row and "day" not in row


def test_fill_rate_by_venue_divides_the_fills_by_every_request_filled_or_not(
    live: LiveServer, http: httpx.Client, delivered: dict[str, Any]
) -> None:
    params = {"from": delivered["from"], "to": delivered["to"], "group_by": "venue"}
    data = get(http, live, DELIVERY, **params).json()["data"]
    assert [(r["venue_id"], r["requests"], r["fills"], r["fill_rate"], r["plays"]) for r in data["rows"]] == [
        (PROD_VENUE, 5, 5, 1.0, 3),
        ("venue-empty", NO_FILLS, 0, 0.0, 0),
    ]
    assert (data["totals"]["requests"], data["totals"]["fills"], data["totals"]["fill_rate"]) == (
        7,
        5,
        0.7143,
    )
    off_the_hour = get(http, live, DELIVERY, **{**params, "from": delivered["from"] + 1}).json()["data"]
    assert all(r["requests"] is None and r["fill_rate"] is None for r in off_the_hour["rows"])


def test_delivery_csv_is_an_attachment_with_a_header_and_the_json_figures(
    live: LiveServer, http: httpx.Client, delivered: dict[str, Any]
) -> None:
    params = {"from": delivered["from"], "to": delivered["to"], "venue_id": PROD_VENUE, "format": "csv"}
    answer = get(http, live, DELIVERY, **params)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "text/csv; charset=utf-8"
    assert answer.headers["content-disposition"] == (
        f'attachment; filename="delivery-{delivered["from"]}-{delivered["to"]}.csv"'
    )
    header, *lines = list(csv.reader(io.StringIO(answer.text)))
    assert header[:4] == ["campaign_id", "requests", "fills", "fill_rate"] and len(header) == 22
    figures = ["", "5", "", "3", "3.0", "3", "2", "2", "1", "1", "0.3333", "0", "1", "0", "1"] + ["0"] * 4
    figures += ["3", "0"]  # direct_plays, programmatic_plays
    assert lines == [[str(live.extra["campaign_id"]), *figures]]


def test_playlog_lists_each_played_ad_request_and_pages_by_cursor(
    live: LiveServer, http: httpx.Client, delivered: dict[str, Any]
) -> None:
    params = {"venue_id": PROD_VENUE, "from": delivered["from"], "to": delivered["to"]}
    answer = get(http, live, PLAYLOG, **params)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert (data["venue_id"], data["screen_id"], data["next_cursor"]) == (PROD_VENUE, None, None)
    played_uuids = delivered["uuids"][:3]
    assert sorted(row["ad_request_uuid"] for row in data["rows"]) == sorted(played_uuids)
    by_uuid = {row["ad_request_uuid"]: row for row in data["rows"]}
    first = by_uuid[played_uuids[0]]
    assert (first["play_time"], first["campaign_id"], first["creative_id"]) == (
        delivered["play_time"],
        live.extra["campaign_id"],
        live.extra["creative_id"],
    )
    assert (first["duplicate_count"], first["late_count"], first["impressions"]) == (1, 0, 1.0)
    assert all(first[f"{e}_at"] is not None for e in ("impression", "start", "third_quartile", "complete"))
    assert by_uuid[played_uuids[2]]["first_quartile_at"] is None
    paged: list[str] = []
    cursor = None
    for _ in range(4):
        page = get(http, live, PLAYLOG, limit=1, **params, **({"cursor": cursor} if cursor else {})).json()[
            "data"
        ]
        paged += [row["ad_request_uuid"] for row in page["rows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert paged == [row["ad_request_uuid"] for row in data["rows"]]


def test_playlog_csv_streams_every_row_across_batches_in_order(live: LiveServer, http: httpx.Client) -> None:
    start = utc("2026-09-01T00:00")
    rows = [played(start + n // 3, venue_id="bulk", screen_id=f"s{n % 2}") for n in range(12_001)]
    engine = make_engine(live.settings.environment("production"))
    with engine.begin() as conn:
        conn.execute(sa.insert(ad_requests), rows)
    engine.dispose()
    params = {"venue_id": "bulk", "from": start, "to": start + 86_400, "format": "csv"}
    with http.stream("GET", f"{live.url}{PLAYLOG}", params=params, headers=admin(live)) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "text/csv; charset=utf-8"
        assert "content-length" not in answer.headers  # streamed, not built in memory first
        text = answer.read().decode()
    header, *lines = list(csv.reader(io.StringIO(text)))
    assert header[0] == "ad_request_uuid" and len(header) == 15
    assert len(lines) == 12_001
    keys = [(int(line[3]), line[0].replace("-", "")) for line in lines]
    assert keys == sorted(keys) and len(set(keys)) == 12_001
    assert {line[0] for line in lines} == {str(row["id"]) for row in rows}
    screen = get(http, live, PLAYLOG, **{**params, "screen_id": "s1", "format": "json", "limit": 100_000})
    assert len(screen.json()["data"]["rows"]) == 6_000


def test_a_berlin_report_folds_the_autumn_change_into_a_25_hour_day(
    live: LiveServer, http: httpx.Client
) -> None:
    first = utc("2026-10-24T22:00")
    engine = make_engine(live.settings.environment("production"))
    with engine.begin() as conn:
        conn.execute(sa.insert(ad_requests), [played(first + 3600 * n, venue_id="berlin") for n in range(25)])
    engine.dispose()
    params = {"from": first, "to": first + 25 * 3600, "venue_id": "berlin", "timezone": "Europe/Berlin"}
    days = get(http, live, DELIVERY, group_by="day", **params).json()["data"]["rows"]
    assert [(row["day"], row["fills"], row["plays"]) for row in days] == [("2026-10-25", 25, 25)]
    hours = get(http, live, DELIVERY, group_by="hour", **params).json()["data"]["rows"]
    labels = [row["hour"] for row in hours]
    assert len(labels) == 25 and labels[2:4] == ["2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00"]


@pytest.mark.parametrize(
    ("path", "params", "status", "code", "field"),
    [
        (DELIVERY, {"to": "7200"}, 400, "missing_field", "from"),
        (DELIVERY, {"from": "3600"}, 400, "missing_field", "to"),
        (DELIVERY, {"from": "noon", "to": "7200"}, 400, "invalid_type", "from"),
        (DELIVERY, {"from": "", "to": "7200"}, 400, "empty_value", "from"),
        (DELIVERY, {"from": "-5", "to": "7200"}, 400, "invalid_field", "from"),
        (DELIVERY, {"from": "7200", "to": "3600"}, 400, "invalid_field", "to"),
        (DELIVERY, {"from": "0", "to": str(367 * 86400)}, 400, "invalid_field", "to"),
        (
            DELIVERY,
            {"from": "0", "to": "3600", "group_by": "campaign,week"},
            400,
            "invalid_field",
            "group_by",
        ),
        (DELIVERY, {"from": "0", "to": "3600", "group_by": "hour,hour"}, 400, "invalid_field", "group_by"),
        (
            DELIVERY,
            {"from": "0", "to": "3600", "timezone": "Mars/Olympus"},
            422,
            "invalid_timezone",
            "timezone",
        ),
        (
            DELIVERY,
            {"from": "0", "to": "3600", "timezone": "/etc/passwd"},
            422,
            "invalid_timezone",
            "timezone",
        ),
        (DELIVERY, {"from": "0", "to": "3600", "format": "xml"}, 400, "invalid_format", "format"),
        (DELIVERY, {"from": "0", "to": "3600", "campaign_id": "0"}, 400, "invalid_field", "campaign_id"),
        (DELIVERY, {"from": "0", "to": "3600", "campaign_id": "1e3"}, 400, "invalid_type", "campaign_id"),
        (DELIVERY, {"from": "0", "to": "3600", "venue_id": "v" * 129}, 400, "too_long", "venue_id"),
        (DELIVERY, {"from": "0", "to": "3600", "screen_id": "a\tb"}, 400, "invalid_characters", "screen_id"),
        (PLAYLOG, {"from": "0", "to": "3600"}, 400, "missing_field", "venue_id"),
        (PLAYLOG, {"venue_id": "v", "to": "3600"}, 400, "missing_field", "from"),
        (PLAYLOG, {"venue_id": "v", "from": "0", "to": str(32 * 86400)}, 400, "invalid_field", "to"),
        (PLAYLOG, {"venue_id": "v", "from": "0", "to": "3600", "limit": "0"}, 400, "invalid_field", "limit"),
        (
            PLAYLOG,
            {"venue_id": "v", "from": "0", "to": "3600", "limit": "100001"},
            400,
            "invalid_field",
            "limit",
        ),
        (
            PLAYLOG,
            {"venue_id": "v", "from": "0", "to": "3600", "cursor": "page2"},
            400,
            "invalid_field",
            "cursor",
        ),
        (
            PLAYLOG,
            {"venue_id": "v", "from": "0", "to": "3600", "format": "tsv"},
            400,
            "invalid_format",
            "format",
        ),
    ],
)
def test_bad_report_parameters_get_the_error_envelope_with_code_and_field(
    live: LiveServer,
    http: httpx.Client,
    path: str,
    params: dict[str, str],
    status: int,
    code: str,
    field: str,
) -> None:
    answer = get(http, live, path, **params)
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert (body["status"], body["error"]["code"], body["error"]["field"]) == (status, code, field)


@pytest.mark.parametrize("path", [DELIVERY, PLAYLOG])
def test_reports_need_a_production_admin_key(live: LiveServer, http: httpx.Client, path: str) -> None:
    assert live.keys
    params = {"venue_id": "v", "from": "0", "to": "3600"}
    missing = http.get(f"{live.url}{path}", params=params)
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "missing_api_key")
    player = http.get(f"{live.url}{path}", params=params, headers={"Ssp-Key": live.keys.production})
    assert (player.status_code, player.json()["error"]["code"]) == (403, "insufficient_scope")
    sandbox = http.get(f"{live.url}{path}", params=params, headers={"Ssp-Key": live.keys.sandbox_admin_only})
    assert (sandbox.status_code, sandbox.json()["error"]["code"]) == (401, "wrong_environment")
    ok = http.get(f"{live.url}{path}", params=params, headers={"Ssp-Key": live.keys.production_admin_only})
    assert ok.status_code == 200 and ok.json()["data"]["rows"] == []


def test_both_reports_are_documented_with_their_parameters_answers_and_key(
    live: LiveServer, http: httpx.Client
) -> None:
    document = http.get(f"{live.url}/openapi.json").json()
    for path, required in ((DELIVERY, {"from", "to"}), (PLAYLOG, {"venue_id", "from", "to"})):
        operation = document["paths"][path]["get"]
        assert operation["security"] == [{"SspKey": []}]
        parameters = {p["name"]: p for p in operation["parameters"]}
        assert {name for name, p in parameters.items() if p.get("required")} == required
        assert parameters["from"]["schema"]["type"] == "integer"
        assert parameters["format"]["schema"]["enum"] == ["json", "csv"]
        assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}
        for status in ("400", "401", "403"):
            schema = operation["responses"][status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}
    delivery = document["paths"][DELIVERY]["get"]
    assert "422" in delivery["responses"]
    assert "null" in delivery["description"] and "Asia/Kolkata" in delivery["description"]
