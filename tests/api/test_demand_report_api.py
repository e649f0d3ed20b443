"""GET /api/v1/reports/demand on a live server (SQLite and PostgreSQL): asks counted by DemandStats and wins
stored in its database read back as JSON and CSV; the delivery report's bad-parameter answers, exactly; the
admin permission; and its operation in the OpenAPI document."""

from __future__ import annotations

import csv
import io
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from adslot.demand.caller import AskResult, PartnerOutcome
from adslot.demand.stats import DemandStats
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, demand_wins
from tests.api.test_reports_api import DELIVERY, get
from tests.conftest import LiveServer
from tests.demand.test_stats import answer, whole
from tests.reporting.support import utc
from tests.reporting.test_demand import win

DEMAND = "/api/v1/reports/demand"
H0 = utc("2026-02-10T08:00")


@pytest.fixture(scope="module")
def seeded(live: LiveServer) -> None:
    """dsp-x asked 3 times in H0 (2 bids, a no-bid) and won 2 (both played, at 2.00 x12.5 and 6.00 x1)."""
    engine = make_engine(live.settings.environment("production"))
    stats = DemandStats(engine)
    for outcome, at in (
        (PartnerOutcome("dsp-x", "bid", checked=answer("dsp-x", 2.0)), H0 + 1),
        (PartnerOutcome("dsp-x", "bid", checked=answer("dsp-x", 6.0, 0.1)), H0 + 2),
        (PartnerOutcome("dsp-x", "no_bid", checked=whole("dsp-x", None)), H0 + 3),
    ):
        stats.count(AskResult("tid", (outcome,)), at)
    assert stats.flush_now()
    wins = [win("dsp-x", H0 + 1, 2.0, 12.5, billed=True), win("dsp-x", H0 + 2, 6.0)]
    with engine.begin() as conn:
        conn.execute(sa.insert(ad_requests), [request for request, _ in wins])
        conn.execute(sa.insert(demand_wins), [row for _, row in wins])
    engine.dispose()


def test_the_demand_report_answers_each_partner_hour_and_its_total(
    live: LiveServer, http: httpx.Client, seeded: None
) -> None:
    answered = get(http, live, DEMAND, **{"from": H0, "to": H0 + 7200, "timezone": "America/New_York"})
    assert answered.status_code == 200, answered.text
    assert answered.headers["content-type"] == "application/json"
    data = answered.json()["data"]
    assert (data["from"], data["to"], data["timezone"]) == (H0, H0 + 7200, "America/New_York")
    (row,) = data["rows"]
    assert (row["partner"], row["hour"]) == ("dsp-x", "2026-02-10T03:00:00-05:00")
    assert (row["requests"], row["bids"], row["bid_rate"], row["no_bids"]) == (3, 2, 0.6667, 1)
    assert (row["wins"], row["win_rate"], row["plays"], row["billed"]) == (2, 1.0, 2, 1)
    assert (row["spend"], row["avg_clearing_cpm"], row["currency"]) == (0.031, 4.0, "USD")  # (25 + 6) / 1000
    assert row["drops"]["below_floor"] == 1
    (total,) = data["totals"]
    assert total == {k: v for k, v in row.items() if k != "hour"}


def test_the_demand_csv_is_an_attachment_of_the_same_figures(
    live: LiveServer, http: httpx.Client, seeded: None
) -> None:
    answered = get(http, live, DEMAND, **{"from": H0, "to": H0 + 3600, "format": "csv"})
    assert answered.status_code == 200, answered.text
    assert answered.headers["content-type"] == "text/csv; charset=utf-8"
    assert answered.headers["content-disposition"] == f'attachment; filename="demand-{H0}-{H0 + 3600}.csv"'
    header, *lines = list(csv.reader(io.StringIO(answered.text)))
    (line,) = lines
    row = dict(zip(header, line, strict=True))
    assert (row["partner"], row["hour"], row["requests"], row["wins"], row["spend"]) == (
        "dsp-x",
        "2026-02-10T08:00:00+00:00",
        "3",
        "2",
        "0.031",
    )
    assert row["drop_below_floor"] == "1" and "drop_no_bid" not in row


BAD: list[tuple[dict[str, str], int, str, str]] = [
    ({"to": "7200"}, 400, "missing_field", "from"),
    ({"from": "3600"}, 400, "missing_field", "to"),
    ({"from": "noon", "to": "7200"}, 400, "invalid_type", "from"),
    ({"from": "", "to": "7200"}, 400, "empty_value", "from"),
    ({"from": "-5", "to": "7200"}, 400, "invalid_field", "from"),
    ({"from": "7200", "to": "3600"}, 400, "invalid_field", "to"),
    ({"from": "0", "to": str(367 * 86400)}, 400, "invalid_field", "to"),
    ({"from": "0", "to": "3600", "timezone": "Mars/Olympus"}, 422, "invalid_timezone", "timezone"),
    ({"from": "0", "to": "3600", "timezone": "/etc/passwd"}, 422, "invalid_timezone", "timezone"),
    ({"from": "0", "to": "3600", "format": "xml"}, 400, "invalid_format", "format"),
]


@pytest.mark.parametrize(("params", "status", "code", "field"), BAD)
def test_bad_parameters_get_the_delivery_reports_exact_answer(
    live: LiveServer, http: httpx.Client, params: dict[str, str], status: int, code: str, field: str
) -> None:
    demand = get(http, live, DEMAND, **params)
    delivery = get(http, live, DELIVERY, **params)
    assert demand.status_code == delivery.status_code == status, demand.text
    body: dict[str, Any] = demand.json()
    assert (body["status"], body["error"]["code"], body["error"]["field"]) == (status, code, field)
    assert body["error"] == delivery.json()["error"]


def test_the_demand_report_needs_a_production_admin_key(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys
    url, params = f"{live.url}{DEMAND}", {"from": "0", "to": "3600"}
    missing = http.get(url, params=params)
    assert (missing.status_code, missing.json()["error"]["code"]) == (401, "missing_api_key")
    player = http.get(url, params=params, headers={"Ssp-Key": live.keys.production})
    assert (player.status_code, player.json()["error"]["code"]) == (403, "insufficient_scope")
    sandbox = http.get(url, params=params, headers={"Ssp-Key": live.keys.sandbox_admin_only})
    assert (sandbox.status_code, sandbox.json()["error"]["code"]) == (401, "wrong_environment")
    ok = http.get(url, params=params, headers={"Ssp-Key": live.keys.production_admin_only})
    assert ok.status_code == 200 and ok.json()["data"]["rows"] == []


def test_the_demand_report_is_documented_with_its_parameters_answers_and_key(
    live: LiveServer, http: httpx.Client
) -> None:
    operation = http.get(f"{live.url}/openapi.json").json()["paths"][DEMAND]["get"]
    assert operation["operationId"] == "getDemandReport"
    assert operation["security"] == [{"SspKey": []}]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert set(parameters) == {"from", "to", "timezone", "format"}
    assert {name for name, p in parameters.items() if p.get("required")} == {"from", "to"}
    assert parameters["format"]["schema"]["enum"] == ["json", "csv"]
    assert set(operation["responses"]["200"]["content"]) == {"application/json", "text/csv"}
    for status in ("400", "401", "403", "422"):
        schema = operation["responses"][status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}
