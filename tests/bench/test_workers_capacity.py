"""bench.workers reads a second worker's gain from each server's best rate over wrk's connection counts: a
closed loop of few connections keeps two workers below their capacity."""

from __future__ import annotations

import argparse

import pytest
from bench.report import Side
from bench.runner import parse_connections
from bench.workers import WorkersRow, capacities, capacity_table, parse_args

from tests.bench.runs import wrk_run


def _row(
    scenario: str, backend: str, connections: int, one: float, two: float, flags: list[str]
) -> WorkersRow:
    return WorkersRow(
        scenario, backend, connections, "", Side.of([wrk_run(one)]), Side.of([wrk_run(two)]), two / one, flags
    )


def test_connection_counts_are_distinct_and_positive_and_default_to_64_and_256() -> None:
    assert parse_connections("64,256") == (64, 256)
    assert parse_connections("128") == (128,)
    for bad in ("", "0", "64,64", "-1", "x", "64,,256"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_connections(bad)
    assert parse_args([]).connections == (64, 256)
    assert parse_args(["--connections", "32"]).connections == (32,)


def test_capacity_is_each_server_s_best_rate_over_the_counts_whichever_count_gave_it() -> None:
    rows = [
        _row("ad_request_json", "sqlite", 64, 17_000, 14_000, []),
        _row("ad_request_json", "sqlite", 256, 15_500, 20_000, []),
        _row("impression", "sqlite", 64, 25_000, 21_000, []),
        _row("impression", "sqlite", 256, 27_000, 26_000, []),
    ]
    ad_request, impression = capacities(rows)
    assert (ad_request.one_worker_rps, ad_request.one_worker_connections) == (17_000, 64)
    assert (ad_request.two_workers_rps, ad_request.two_workers_connections) == (20_000, 256)
    assert ad_request.speedup == 20_000 / 17_000 and not ad_request.errors
    assert (impression.one_worker_rps, impression.two_workers_rps) == (27_000, 26_000)
    assert impression.speedup < 1
    text = capacity_table([ad_request, impression])
    assert "| ad_request_json | sqlite | 17,000 (64) | 20,000 (256) | 1.18 | yes |" in text
    assert "| impression | sqlite | 27,000 (256) | 26,000 (256) | 0.96 | no |" in text


def test_a_pair_with_errors_at_any_count_never_beats_one_worker() -> None:
    rows = [
        _row("mix", "postgres", 64, 10_000, 9_000, []),
        _row("mix", "postgres", 256, 10_000, 30_000, ["2 workers: 500 answers above 399"]),
    ]
    (mix,) = capacities(rows)
    assert mix.errors and mix.speedup == 3.0
    assert capacity_table([mix]).endswith("| 3.00 | no (errors) |")
