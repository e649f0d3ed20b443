"""The programmatic scenario: an ad request whose venue's only demand is a test bidder, measured beside
ad_request_json; its rows report the latency adslot adds to the bidder's own delay."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from bench.report import (
    Report,
    Row,
    Side,
    added_latency_us,
    asked_share,
    fill_share,
    machine_facts,
    markdown,
    programmatic_notes,
    programmatic_table,
)
from bench.runner import Bench, parse_args
from bench.scenarios import PROGRAMMATIC_VENUE_ID, select
from bench.servers import BenchBidder, bidder_command, running_bidder
from bench.wrk import WrkResult

from bench import nodes, workers
from tests.bench.runs import config, wrk_run


def run_at(p50_us: int, p99_us: int, rps: float = 2_000, bidder: dict[str, int] | None = None) -> WrkResult:
    """A 5-second adslot run: 10,000 answers at 2,000 req/s, 9,000 of them filled."""
    return WrkResult(
        requests=int(rps * 5),
        duration_s=5.0,
        rps=rps,
        bytes=0,
        p50_us=p50_us,
        p90_us=p50_us,
        p99_us=p99_us,
        p999_us=p99_us,
        max_us=p99_us,
        mean_us=float(p50_us),
        non2xx=0,
        socket_errors={},
        statuses={"200": 9_000, "204": 1_000},
        bidder={"request": 10_000, "bid": 10_000, "win": 9_000} if bidder is None else bidder,
    )


def programmatic_row(
    kind: str = "max", delay_ms: float | None = 20, asked: dict[str, int] | None = None
) -> Row:
    row = Row(
        "programmatic",
        "sqlite",
        kind,
        "",
        Side.of([wrk_run(10_000)]),
        Side.of([run_at(21_500, 30_000, bidder=asked)]),
        0.2,
        "—",
        None,
        [],
    )
    row.bidder_delay_ms = delay_ms
    row.connections = {"bare": 64, "adslot": 64}
    return row


def test_added_latency_is_adslots_p50_and_p99_less_the_bidders_delay() -> None:
    assert added_latency_us(programmatic_row(delay_ms=20)) == (1_500, 10_000)
    assert added_latency_us(programmatic_row(delay_ms=0)) == (21_500, 30_000)


def test_a_row_without_a_bidder_has_no_added_latency_and_no_programmatic_line() -> None:
    row = programmatic_row(delay_ms=None)
    assert added_latency_us(row) is None
    assert len(programmatic_table([row]).splitlines()) == 2


def test_the_programmatic_table_gives_the_ratio_the_added_latency_and_what_the_bidder_saw() -> None:
    header, _, line = programmatic_table([programmatic_row()]).splitlines()
    assert "added p50 µs | added p99 µs | asked | filled | wins" in header
    assert line == (
        "| programmatic | sqlite | 20 | 10,000 | 2,000 | 0.20 | 21,500 | 30,000 | 1,500 | 10,000 "
        "| 100% | 90% | 9,000 | 64 |"
    )


def test_a_half_load_programmatic_row_shows_no_rate_ratio_since_its_rates_are_paced() -> None:
    line = programmatic_table([programmatic_row("half_load")]).splitlines()[-1]
    assert line.startswith("| programmatic @ half load | sqlite | 20 | 10,000 | 2,000 | — |")


def test_the_report_shows_the_programmatic_table_only_when_the_scenario_ran() -> None:
    machine = machine_facts([], "wrk")
    plain = Report(machine, config(), {"sqlite": "ran"}, [], [])
    assert "added p50" not in markdown(plain)
    with_bidder = Report(machine, config(), {"sqlite": "ran"}, [programmatic_row()], [])
    assert "| added p50 µs | added p99 µs |" in markdown(with_bidder)


def test_rows_whose_runs_asked_the_bidder_nothing_are_noted_as_measuring_no_auction() -> None:
    asked_nothing = programmatic_row(asked={})
    (note,) = programmatic_notes([programmatic_row(), asked_nothing])
    assert "no bid request" in note and "no auction" in note


def test_rows_where_the_partner_was_mostly_skipped_are_noted_with_the_share_asked() -> None:
    skipped = programmatic_row(asked={"request": 3_000, "bid": 3_000})
    assert asked_share(skipped.adslot) == 0.3
    (note,) = programmatic_notes([skipped])
    assert "only 30% of adslot's ad requests asked the test bidder" in note
    assert "circuit breaker" in note


def test_the_fill_share_needs_the_status_tally() -> None:
    side = programmatic_row().adslot
    assert fill_share(side) == 0.9
    assert fill_share(Side.of([wrk_run(1_000)])) is None


def test_the_scenario_posts_json_ad_requests_for_its_own_venue_and_runs_beside_ad_request_json() -> None:
    both = select(["programmatic", "ad_request_json"])
    assert [s.name for s in both] == ["ad_request_json", "programmatic"]
    (scenario,) = select(["programmatic"])
    assert scenario.script == "ad_request.lua"
    assert scenario.args == {"format": "json", "venue": PROGRAMMATIC_VENUE_ID}
    assert scenario.programmatic and scenario.target_ratio is None


def test_the_command_line_selects_it_with_a_20_ms_bidder_by_default() -> None:
    options = parse_args(["--scenarios", "programmatic", "--no-postgres"])
    assert [s.name for s in options.scenarios] == ["programmatic"]
    assert options.bidder_delay_ms == 20
    assert parse_args(["--bidder-delay-ms", "5"]).bidder_delay_ms == 5
    with pytest.raises(SystemExit):
        parse_args(["--bidder-delay-ms", "-1"])


def test_its_rows_get_the_bidders_delay_and_other_scenarios_rows_do_not() -> None:
    bench = Bench(parse_args(["--scenarios", "programmatic", "--bidder-delay-ms", "15"]), "wrk")
    (scenario,) = select(["programmatic"])
    (other,) = select(["ad_request_json"])
    tagged, untouched = (programmatic_row(delay_ms=None) for _ in range(2))
    bench.tag_programmatic(scenario, [tagged])
    bench.tag_programmatic(other, [untouched])
    assert tagged.bidder_delay_ms == 15.0
    assert untouched.bidder_delay_ms is None


def test_its_max_rate_runs_use_the_first_connection_count_only() -> None:
    bench = Bench(parse_args(["--connections", "64,256"]), "wrk")
    assert bench.counts(select(["programmatic"])[0]) == (64,)
    assert bench.counts(select(["ad_request_json"])[0]) is None


def test_the_bidders_counts_are_summed_over_rounds_per_side() -> None:
    side = Side.of(
        [run_at(20_000, 30_000, bidder={"request": 4}), run_at(20_000, 30_000, bidder={"request": 6})]
    )
    assert side.bidder == {"request": 10}


def test_the_bidder_always_bids_after_its_delay_and_logs_to_a_file(tmp_path: Path) -> None:
    command = bidder_command(9100, 20, tmp_path / "log.jsonl")
    assert command[-12:] == [
        *("--host", "127.0.0.1", "--port", "9100", "--delay-ms", "20"),
        *("--no-bid-rate", "0", "--seed", "1", "--log", str(tmp_path / "log.jsonl")),
    ]


def test_the_log_is_counted_by_kind_once_and_a_line_being_written_waits(tmp_path: Path) -> None:
    log = tmp_path / "bidder.jsonl"
    bidder = BenchBidder("http://127.0.0.1:1", 20, None, log)  # type: ignore[arg-type]
    lines = [{"kind": "request"}, {"kind": "bid"}, {"kind": "request"}, {"kind": "no_bid"}]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"kind": "win"')
    assert bidder.kinds() == {"request": 2, "bid": 1, "no_bid": 1}
    with log.open("a") as more:
        more.write(', "query": {}}\n')
    assert bidder.kinds() == {"win": 1}
    assert bidder.kinds() == {}


def test_the_bench_bidder_starts_answers_a_bid_request_and_its_log_counts_it(tmp_path: Path) -> None:
    body = {
        "id": "bench-1",
        "imp": [{"id": "1", "video": {"mimes": ["video/mp4"], "w": 1920, "h": 1080}}],
        "dooh": {"id": PROGRAMMATIC_VENUE_ID},
    }
    with running_bidder(0, tmp_path) as bidder:
        answer = httpx.post(f"{bidder.url}/openrtb2/auction", json=body, timeout=10)
        assert answer.status_code == 200
        assert answer.json()["seatbid"][0]["bid"][0]["price"] > 0
        assert bidder.kinds() == {"request": 1, "bid": 1}
    assert bidder.process.poll() is not None, "stopped with its block"


def test_the_workers_and_nodes_benchmarks_refuse_it_since_they_start_no_bidder() -> None:
    for parse in (workers.parse_args, nodes.parse_args):
        with pytest.raises(SystemExit):
            parse(["--scenarios", "programmatic"])
