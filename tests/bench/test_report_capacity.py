"""Max-rate runs at several connection counts: each server is compared at its own best count, and every
count's runs stay in the report (bench.report.capacity_row, levels_table)."""

from __future__ import annotations

from bench.report import (
    Report,
    Row,
    capacity_row,
    levels_table,
    machine_facts,
    markdown,
    max_row,
    notes,
    table,
)
from bench.scenarios import select

from tests.bench.runs import config, wrk_run

IMPRESSION = select(["impression"])[0]


def _level(connections: int, bare: float, adslot: float, adslot_errors: int = 0) -> Row:
    return max_row(
        IMPRESSION, "postgres", [wrk_run(bare)], [wrk_run(adslot, non2xx=adslot_errors)], connections, "level"
    )


def test_each_server_is_taken_at_the_connection_count_of_its_highest_rate() -> None:
    levels = [_level(64, bare=20_000, adslot=12_000), _level(256, bare=19_000, adslot=15_000)]
    row = capacity_row(IMPRESSION, "postgres", levels)
    assert row.kind == "max"
    assert (row.bare.rps, row.adslot.rps) == (20_000, 15_000)
    assert row.ratio == 0.75 and row.met is True
    assert row.connections == {"bare": 64, "adslot": 256}


def test_a_server_slower_at_every_count_still_misses_its_target() -> None:
    levels = [_level(64, bare=20_000, adslot=12_000), _level(256, bare=21_000, adslot=13_000)]
    row = capacity_row(IMPRESSION, "postgres", levels)
    assert row.ratio is not None and round(row.ratio, 3) == round(13_000 / 21_000, 3)
    assert row.met is False
    assert row.connections == {"bare": 256, "adslot": 256}


def test_errors_at_any_count_fail_the_row_and_are_noted_once_with_their_count() -> None:
    levels = [
        _level(64, bare=20_000, adslot=12_000),
        _level(256, bare=19_000, adslot=16_000, adslot_errors=7),
    ]
    row = capacity_row(IMPRESSION, "postgres", levels)
    assert row.met is False and len(row.flags) == 1
    (error,) = [n for n in notes([*levels, row]) if n.startswith("ERRORS")]
    assert "at 256 connections, adslot: 7 non-2xx answers" in error


def test_the_main_table_shows_the_best_rows_and_the_levels_table_every_count() -> None:
    levels = [_level(64, bare=20_000, adslot=12_000), _level(256, bare=19_000, adslot=15_000)]
    rows = [*levels, capacity_row(IMPRESSION, "postgres", levels)]
    main = table(rows).splitlines()
    assert len(main) == 3, "the header, its rule and the one best-of row"
    assert main[2].startswith("| impression | postgres | 20,000 | 15,000 | 0.75 |")
    assert main[2].endswith("| 64 / 256 |")
    each = levels_table(rows).splitlines()[2:]
    assert [line.split(" | ")[2:6] for line in each] == [
        ["64", "20,000", "12,000", "0.60"],
        ["256", "19,000", "15,000", "0.79"],
    ]


def test_the_markdown_has_the_levels_table_only_when_several_counts_ran() -> None:
    levels = [_level(64, bare=20_000, adslot=12_000), _level(256, bare=19_000, adslot=15_000)]
    several = Report(
        machine_facts([], "wrk"), config([64, 256]), {}, [*levels, capacity_row(IMPRESSION, "x", levels)], []
    )
    text = markdown(several)
    assert "64 and 256 connections" in text and "Each connection count" in text
    one = Report(
        machine_facts([], "wrk"),
        config([64]),
        {},
        [max_row(IMPRESSION, "x", [wrk_run(2)], [wrk_run(1)], 64)],
        [],
    )
    assert "Each connection count" not in markdown(one)
