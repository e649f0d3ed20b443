"""The demand report on SQLite and PostgreSQL: per partner and hour, asks (counted by DemandStats and flushed)
and wins (demand_wins rows, played or not, billed or not) folded into exact figures and rates; spend = price x
multiplier / 1000 over plays; hours labelled in any time zone; CSV columns; the CLI; bad input refused as the
delivery report refuses it."""

from __future__ import annotations

import csv
import io
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from adslot.cli import main
from adslot.demand.auction import DROP_REASONS
from adslot.demand.caller import AskResult, PartnerOutcome
from adslot.demand.notice_rules import NOTICE_FAULTS
from adslot.demand.stats import DemandStats
from adslot.environment import prepare_database
from adslot.errors import ApiError
from adslot.reporting.demand import demand_report
from adslot.reporting.formats import demand_csv, demand_json
from adslot.reporting.query import parse_delivery, parse_demand
from adslot.settings import load_settings
from adslot.storage.database import make_engine
from adslot.storage.tables import ad_requests, demand_stats, demand_wins
from tests.conftest import BACKENDS, POSTGRES_URL, cli_databases, drop_schemas
from tests.demand.test_stats import answer, whole
from tests.reporting.support import ad_request, utc

H0 = utc("2026-03-28T23:00")
"""Midnight in Berlin (+01:00) on 2026-03-29, when its clocks go forward at 02:00."""
H1, H2, H3 = H0 + 3600, H0 + 2 * 3600, H0 + 3 * 3600
DROPS = [reason for reason in DROP_REASONS if reason != "no_bid"]
NO_DROPS = dict.fromkeys(DROPS, 0)
NO_NOTICE_DROPS = dict.fromkeys(NOTICE_FAULTS, 0)


@pytest.fixture
def demand_db(db: sa.Engine) -> sa.Engine:
    """The reporting tests' database, emptied of demand wins and stats too."""
    with db.begin() as conn:
        conn.execute(sa.delete(demand_wins))
        conn.execute(sa.delete(demand_stats))
    return db


def asks(*outcomes: PartnerOutcome) -> AskResult:
    return AskResult("tid", outcomes)


def count(
    engine: sa.Engine,
    slots: list[tuple[AskResult, int]],
    lost: tuple[tuple[str, int, int], ...] = (),
    notices: tuple[tuple[str, int, str], ...] = (),
) -> None:
    """Count the asks (and the notices dropped) as a worker does, and flush them."""
    stats = DemandStats(engine)
    for result, play_time in slots:
        stats.count(result, play_time)
    for partner, play_time, n in lost:
        stats.lost(partner, play_time, n)
    for partner, play_time, fault in notices:
        stats.notice_dropped(partner, play_time, fault)
    assert stats.flush_now()


def win(
    partner: str,
    play_time: int,
    price_cpm: float,
    multiplier: float = 1.0,
    *,
    played: bool = True,
    billed: bool = False,
    currency: str = "USD",
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A programmatic ad request (no campaign or creative) and its demand_wins row."""
    request = ad_request(
        play_time,
        campaign_id=None,
        creative_id=None,
        impressions=multiplier,
        impression_at=play_time if played else None,
    )
    row = {
        "ad_request_id": request["id"],
        "partner": partner,
        "auction_id": uuid.uuid4().hex,
        "imp_id": "1",
        "bid_price_micros": round(price_cpm * 1_000_000),
        "price_micros": round(price_cpm * 1_000_000),
        "min_to_win_micros": 0,
        "currency": currency,
        "multiplier": multiplier,
        "play_time": play_time,
        "created_at": play_time - 60,
        "bill_due_at": play_time if played else None,
        "billed_at": play_time + 5 if billed else None,
    }
    return request, row


def store_wins(engine: sa.Engine, *wins: tuple[dict[str, Any], dict[str, Any]]) -> None:
    with engine.begin() as conn:
        conn.execute(sa.insert(ad_requests), [request for request, _ in wins])
        conn.execute(sa.insert(demand_wins), [row for _, row in wins])


def report(engine: sa.Engine, start: int, end: int, timezone: str = "UTC", fmt: str = "json") -> Any:
    query = parse_demand(start=str(start), end=str(end), timezone=timezone, fmt=fmt)
    with engine.connect() as conn:
        return demand_report(conn, query)


def data(engine: sa.Engine, start: int, end: int, timezone: str = "UTC") -> dict[str, Any]:
    body = json.loads(demand_json(report(engine, start, end, timezone)))
    assert body["status"] == 200
    result: dict[str, Any] = body["data"]
    return result


def seed(engine: sa.Engine) -> None:
    """Two hours of dsp-a (EUR) and one of dsp-b (USD):

    H0: dsp-a asked 4 times: 2 bids (one with a bid dropped below its floor), a no-bid, a timeout; 2 wins at
    3.00 and 5.00 EUR (x2.5 and x1 impressions), both played, one billed; 1 bid lost, whose loss notice was to
    an undeclared host, and a win notice too long.
    H1: dsp-a asked twice: an HTTP 500 and a connection error; dsp-b asked 3 times: a bid, an answer of bad
    JSON, a no-bid, and skipped once for its max_qps; dsp-b won 1 at 4.00 USD that did not play.
    """
    count(
        engine,
        [
            (asks(PartnerOutcome("dsp-a", "bid", checked=answer("dsp-a", 3.0, 1.0))), H0 + 10),
            (asks(PartnerOutcome("dsp-a", "bid", checked=answer("dsp-a", 5.0))), H0 + 20),
            (asks(PartnerOutcome("dsp-a", "no_bid", checked=whole("dsp-a", None))), H0 + 30),
            (asks(PartnerOutcome("dsp-a", "timeout", "timeout")), H0 + 3599),
            (asks(PartnerOutcome("dsp-a", "error", "http_500")), H1),
            (
                asks(
                    PartnerOutcome("dsp-b", "skipped_qps", "max_qps"),
                    PartnerOutcome("dsp-a", "error", "connect"),
                    PartnerOutcome("dsp-b", "bid", checked=answer("dsp-b", 4.0)),
                ),
                H1 + 100,
            ),
            (
                asks(PartnerOutcome("dsp-b", "dropped", "bad_json", checked=whole("dsp-b", b"[oops"))),
                H1 + 200,
            ),
            (asks(PartnerOutcome("dsp-b", "no_bid", checked=whole("dsp-b", b""))), H1 + 300),
        ],
        lost=(("dsp-a", H0 + 10, 1),),
        notices=(("dsp-a", H0 + 10, "notice_host"), ("dsp-a", H0 + 20, "notice_too_long")),
    )
    store_wins(
        engine,
        win("dsp-a", H0 + 10, 3.0, 2.5, billed=True, currency="EUR"),
        win("dsp-a", H0 + 20, 5.0, 1.0, currency="EUR"),
        win("dsp-b", H1 + 100, 4.0, 1.0, played=False),
    )


def figures(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "requests": 0,
        "bids": 0,
        "bid_rate": None,
        "no_bids": 0,
        "dropped": 0,
        "timeouts": 0,
        "errors": 0,
        "errors_by_reason": {},
        "drops": NO_DROPS,
        "skipped_qps": 0,
        "skipped_breaker": 0,
        "lost": 0,
        "wins": 0,
        "win_rate": None,
        "plays": 0,
        "spend": None,
        "avg_clearing_cpm": None,
        "currency": None,
        "billed": 0,
        "notices_dropped": 0,
        "notice_drops": NO_NOTICE_DROPS,
    }
    return base | changes


A_H0 = figures(
    requests=4,
    bids=2,
    bid_rate=0.5,
    no_bids=1,
    timeouts=1,
    drops=NO_DROPS | {"below_floor": 1},
    lost=1,
    wins=2,
    win_rate=1.0,
    plays=2,
    spend=0.0125,  # (3.00 x 2.5 + 5.00 x 1) / 1000
    avg_clearing_cpm=4.0,
    currency="EUR",
    billed=1,
    notices_dropped=2,
    notice_drops=NO_NOTICE_DROPS | {"notice_host": 1, "notice_too_long": 1},
)
A_H1 = figures(requests=2, bid_rate=0.0, errors=2, errors_by_reason={"connect": 1, "http_500": 1})
B_H1 = figures(
    requests=3,
    bids=1,
    bid_rate=0.3333,
    no_bids=1,
    dropped=1,
    drops=NO_DROPS | {"bad_json": 1},
    skipped_qps=1,
    wins=1,
    win_rate=1.0,
    plays=0,
    spend=0.0,
    avg_clearing_cpm=4.0,
    currency="USD",
)


def test_each_partner_hour_has_exact_asks_wins_plays_spend_and_rates(demand_db: sa.Engine) -> None:
    seed(demand_db)
    result = data(demand_db, H0, H3)
    assert (result["from"], result["to"], result["timezone"]) == (H0, H3, "UTC")
    assert result["rows"] == [
        {**A_H0, "partner": "dsp-a", "hour": "2026-03-28T23:00:00+00:00"},
        {**A_H1, "partner": "dsp-a", "hour": "2026-03-29T00:00:00+00:00"},
        {**B_H1, "partner": "dsp-b", "hour": "2026-03-29T00:00:00+00:00"},
    ]


def test_each_partner_has_a_total_of_its_hours_with_rates_from_the_sums(demand_db: sa.Engine) -> None:
    seed(demand_db)
    totals = data(demand_db, H0, H3)["totals"]
    a_total = figures(
        requests=6,
        bids=2,
        bid_rate=0.3333,
        no_bids=1,
        timeouts=1,
        errors=2,
        errors_by_reason={"connect": 1, "http_500": 1},
        drops=NO_DROPS | {"below_floor": 1},
        lost=1,
        wins=2,
        win_rate=1.0,
        plays=2,
        spend=0.0125,
        avg_clearing_cpm=4.0,
        currency="EUR",
        billed=1,
        notices_dropped=2,
        notice_drops=NO_NOTICE_DROPS | {"notice_host": 1, "notice_too_long": 1},
    )
    assert totals == [{**a_total, "partner": "dsp-a"}, {**B_H1, "partner": "dsp-b"}]


def test_spend_is_price_times_multiplier_over_1000_summed_over_plays_only(demand_db: sa.Engine) -> None:
    store_wins(
        demand_db,
        win("dsp", H0, 2.5, 12.5),
        win("dsp", H0 + 1, 7.0, 0.5),
        win("dsp", H0 + 2, 100.0, 3.0, played=False),
    )
    (row,) = data(demand_db, H0, H1)["rows"]
    assert row["spend"] == round((2.5 * 12.5 + 7.0 * 0.5) / 1000, 6) == 0.03475
    assert (row["wins"], row["plays"], row["avg_clearing_cpm"]) == (3, 2, round((2.5 + 7.0 + 100.0) / 3, 6))
    assert (row["requests"], row["bid_rate"], row["win_rate"]) == (0, None, None)  # no asks counted


def test_a_win_whose_ad_request_retention_deleted_still_counts_as_played_once_its_billing_came_due(
    demand_db: sa.Engine,
) -> None:
    store_wins(demand_db, win("dsp", H0, 2.0), win("dsp", H0 + 1, 4.0), win("dsp", H0 + 2, 8.0, played=False))
    with demand_db.begin() as conn:
        conn.execute(sa.delete(ad_requests))  # as the retention's rollup does
    (row,) = data(demand_db, H0, H1)["rows"]
    assert (row["wins"], row["plays"], row["spend"]) == (3, 2, 0.006)


def test_wins_in_several_currencies_have_no_spend_price_or_currency(demand_db: sa.Engine) -> None:
    store_wins(demand_db, win("dsp", H0, 2.0, currency="EUR"), win("dsp", H0 + 1, 3.0, currency="USD"))
    (row,) = data(demand_db, H0, H1)["rows"]
    assert (row["wins"], row["plays"], row["spend"], row["avg_clearing_cpm"], row["currency"]) == (
        2,
        2,
        None,
        None,
        None,
    )


def test_hours_count_when_they_start_within_from_and_to_asks_and_wins_alike(demand_db: sa.Engine) -> None:
    seed(demand_db)
    assert [(r["partner"], r["hour"]) for r in data(demand_db, H0 + 1, H2)["rows"]] == [
        ("dsp-a", "2026-03-29T00:00:00+00:00"),
        ("dsp-b", "2026-03-29T00:00:00+00:00"),
    ]
    only_h0 = data(demand_db, H0 - 1800, H0 + 1)["rows"]
    assert [(r["partner"], r["requests"], r["wins"]) for r in only_h0] == [("dsp-a", 4, 2)]
    assert data(demand_db, H0 + 1, H0 + 3599)["rows"] == []


def test_hours_are_labelled_in_the_time_zone_across_a_dst_change(demand_db: sa.Engine) -> None:
    hours = [H0 + 3600 * n for n in range(4)]
    count(demand_db, [(asks(PartnerOutcome("dsp", "timeout", "timeout")), hour + 5) for hour in hours])
    berlin = data(demand_db, H0, H0 + 4 * 3600, "Europe/Berlin")
    assert berlin["timezone"] == "Europe/Berlin"
    assert [r["hour"] for r in berlin["rows"]] == [
        "2026-03-29T00:00:00+01:00",
        "2026-03-29T01:00:00+01:00",
        "2026-03-29T03:00:00+02:00",  # 02:00 never happened in Berlin that night
        "2026-03-29T04:00:00+02:00",
    ]
    assert [r["timeouts"] for r in berlin["rows"]] == [1, 1, 1, 1]
    kolkata = data(demand_db, H0, H0 + 3600, "Asia/Kolkata")
    assert [r["hour"] for r in kolkata["rows"]] == ["2026-03-29T04:30:00+05:30"]


def test_the_autumn_repeated_hour_is_two_rows(demand_db: sa.Engine) -> None:
    first = utc("2026-10-24T23:00")  # 01:00 in Berlin; the clocks go back at 03:00
    count(
        demand_db, [(asks(PartnerOutcome("dsp", "timeout", "timeout")), first + 3600 * n) for n in range(3)]
    )
    rows = data(demand_db, first, first + 3 * 3600, "Europe/Berlin")["rows"]
    assert [r["hour"] for r in rows] == [
        "2026-10-25T01:00:00+02:00",
        "2026-10-25T02:00:00+02:00",
        "2026-10-25T02:00:00+01:00",
    ]


def test_csv_has_a_row_per_partner_hour_errors_in_one_column_and_a_column_per_drop_reason(
    demand_db: sa.Engine,
) -> None:
    seed(demand_db)
    body = demand_csv(report(demand_db, H0, H3)).decode()
    assert body.endswith("\r\n")
    header, *lines = list(csv.reader(io.StringIO(body)))
    assert header == [
        "partner",
        "hour",
        "requests",
        "bids",
        "bid_rate",
        "no_bids",
        "dropped",
        "timeouts",
        "errors",
        "skipped_qps",
        "skipped_breaker",
        "lost",
        "wins",
        "win_rate",
        "plays",
        "spend",
        "avg_clearing_cpm",
        "currency",
        "billed",
        "notices_dropped",
        *(f"drop_{reason}" for reason in DROPS),
        *(f"notices_dropped_{fault.removeprefix('notice_')}" for fault in NOTICE_FAULTS),
    ]
    assert "drop_no_bid" not in header and "errors_by_reason" not in header
    rows = [dict(zip(header, line, strict=True)) for line in lines]
    assert [(r["partner"], r["hour"]) for r in rows] == [
        ("dsp-a", "2026-03-28T23:00:00+00:00"),
        ("dsp-a", "2026-03-29T00:00:00+00:00"),
        ("dsp-b", "2026-03-29T00:00:00+00:00"),
    ]
    assert (
        rows[0]["spend"] == "0.0125" and rows[0]["drop_below_floor"] == "1" and rows[0]["currency"] == "EUR"
    )
    assert (
        rows[0]["notices_dropped"],
        rows[0]["notices_dropped_host"],
        rows[0]["notices_dropped_too_long"],
    ) == (
        "2",
        "1",
        "1",
    )
    assert rows[1]["notices_dropped_host"] == "0"
    assert rows[1]["errors"] == "2" and rows[1]["win_rate"] == "" and rows[1]["spend"] == ""
    assert rows[2]["drop_bad_json"] == "1" and rows[2]["bid_rate"] == "0.3333"


def test_a_report_of_nothing_has_no_rows_and_no_totals(demand_db: sa.Engine) -> None:
    result = data(demand_db, H0, H3)
    assert (result["rows"], result["totals"]) == ([], [])
    assert demand_csv(report(demand_db, H0, H3)).decode().count("\r\n") == 1


@pytest.mark.parametrize(
    "params",
    [
        {"start": None, "end": "7200"},
        {"start": "3600", "end": None},
        {"start": "noon", "end": "7200"},
        {"start": "", "end": "7200"},
        {"start": "-5", "end": "7200"},
        {"start": "7200", "end": "3600"},
        {"start": "0", "end": str(367 * 86400)},
        {"start": "0", "end": "3600", "timezone": "Mars/Olympus"},
        {"start": "0", "end": "3600", "timezone": "/etc/passwd"},
        {"start": "0", "end": "3600", "fmt": "xml"},
    ],
)
def test_bad_input_is_refused_exactly_as_the_delivery_report_refuses_it(params: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as delivery:
        parse_delivery(**params)
    with pytest.raises(ApiError) as demand:
        parse_demand(**params)
    assert (demand.value.status, demand.value.code, demand.value.field, demand.value.message) == (
        delivery.value.status,
        delivery.value.code,
        delivery.value.field,
        delivery.value.message,
    )


Invoke = Callable[..., str]


@pytest.fixture(params=BACKENDS)
def cli(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Invoke, sa.Engine]]:
    schemas = cli_databases(str(request.param), tmp_path, monkeypatch)
    env = load_settings().environment("production")
    prepare_database(env)
    engine = make_engine(env)
    runner = CliRunner()

    def invoke(*args: str, ok: bool = True) -> str:
        result = runner.invoke(main, ["demand", "report", *args])
        assert (result.exit_code == 0) == ok, result.output
        return result.output

    yield invoke, engine
    engine.dispose()
    if schemas and POSTGRES_URL:
        drop_schemas(schemas)


def test_the_cli_prints_the_reports_json_and_csv(cli: tuple[Invoke, sa.Engine]) -> None:
    invoke, engine = cli
    seed(engine)
    printed = json.loads(invoke("--from", str(H0), "--to", str(H3), "--tz", "Europe/Berlin"))
    assert printed["timezone"] == "Europe/Berlin"
    assert [(r["partner"], r["hour"], r["requests"]) for r in printed["rows"]] == [
        ("dsp-a", "2026-03-29T00:00:00+01:00", 4),
        ("dsp-a", "2026-03-29T01:00:00+01:00", 2),
        ("dsp-b", "2026-03-29T01:00:00+01:00", 3),
    ]
    assert printed["totals"][0] | {"partner": "dsp-a"} == printed["totals"][0]
    text = invoke("--from", str(H0), "--to", str(H3), "--timezone", "UTC", "--format", "csv")
    header, *lines = list(csv.reader(io.StringIO(text)))
    assert header[:3] == ["partner", "hour", "requests"] and len(lines) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "10", "--to", "5"], "invalid_field (to)"),
        (["--from", "0", "--to", "3600", "--tz", "Nope/No"], "invalid_timezone (timezone)"),
        (["--from", "noon", "--to", "3600"], "invalid_type (from)"),
    ],
)
def test_the_cli_refuses_bad_options_with_the_apis_error_code_and_field(
    cli: tuple[Invoke, sa.Engine], args: list[str], message: str
) -> None:
    invoke, _ = cli
    assert message in invoke(*args, ok=False)


def test_retention_drops_a_rolled_up_wins_markup_and_leaves_the_demand_report_identical(
    demand_db: sa.Engine,
) -> None:
    from tests.retention.support import CUTOFF, roll_all

    old_request, old_win = win("dsp-a", CUTOFF - 7200, 3.0, 2.0, billed=True)
    new_request, new_win = win("dsp-a", CUTOFF + 7200, 4.0)
    old_request["settled_at"] = old_request["expires_at"]
    old_request["settle_reason"] = "played"
    store_wins(
        demand_db, (old_request, old_win | {"adm": "<VAST/>"}), (new_request, new_win | {"adm": "<VAST/>"})
    )
    before = data(demand_db, CUTOFF - 86400, CUTOFF + 86400)
    assert roll_all(demand_db) == 1
    assert data(demand_db, CUTOFF - 86400, CUTOFF + 86400) == before
    with demand_db.connect() as conn:
        markup = dict(conn.execute(sa.select(demand_wins.c.ad_request_id, demand_wins.c.adm)).all())
    assert markup == {old_request["id"]: None, new_request["id"]: "<VAST/>"}
