"""The report's tables say what each ratio is made of: the ratio in every round, and CPU per request."""

from __future__ import annotations

import msgspec
from bench.report import (
    Report,
    Row,
    Side,
    cpu_table,
    growth_notes,
    machine_facts,
    markdown,
    notes,
    round_ratios,
    table,
)
from bench.wrk import WrkResult

from tests.bench.runs import config, wrk_run


def _row(kind: str, bare: list[WrkResult], adslot: list[WrkResult]) -> Row:
    return Row("impression", "sqlite", kind, "", Side.of(bare), Side.of(adslot), 0.5, ">= 0.7", False, [])


def test_each_round_s_ratio_is_adslot_over_the_bare_run_of_the_same_round() -> None:
    row = _row(
        "max",
        [wrk_run(20_000), wrk_run(10_000), wrk_run(16_000)],
        [wrk_run(10_000), wrk_run(8_000), wrk_run(12_000)],
    )
    assert round_ratios(row) == [0.5, 0.8, 0.75]
    assert "| 0.50 · 0.80 · 0.75 |" in table([row])


def test_a_half_load_row_has_no_ratio_by_round() -> None:
    row = _row("half_load", [wrk_run(10_000)], [wrk_run(5_000)])
    assert round_ratios(row) == []
    assert table([row]).splitlines()[-1].endswith("| — |")


def test_the_cpu_table_gives_each_group_s_median_and_the_ratio_of_the_machine_s_cost() -> None:
    bare = {"workers": 50.0, "ledger writer": 0.0, "wrk": 25.0}
    adslot = {"workers": 45.0, "ledger writer": 35.0, "wrk": 20.0}
    slower = {"workers": 60.0, "ledger writer": 45.0, "wrk": 20.0}
    runs = [wrk_run(10_000, adslot), wrk_run(9_000, slower), wrk_run(11_000, adslot)]
    row = _row("max", [wrk_run(20_000, bare)] * 3, runs)
    lines = cpu_table([row]).splitlines()
    bare_line = "| impression | sqlite | bare | 20,000 | 50.0 | 0.0 | — | 25.0 | 75.0 | 90% | — |"
    assert lines[2] == bare_line
    # Medians per group (45, 35, 20 of 45/60/45, 35/45/35, 20/20/20): 100 µs against the bare app's 75.
    adslot_line = "| impression | sqlite | adslot | 10,000 | 45.0 | 35.0 | — | 20.0 | 100.0 | 90% | 0.75 |"
    assert lines[3] == adslot_line


def test_rows_without_cpu_figures_leave_the_cpu_table_and_its_text_out() -> None:
    row = _row("max", [wrk_run(20_000)], [wrk_run(10_000)])
    assert len(cpu_table([row]).splitlines()) == 2
    assert "CPU per request" not in markdown(
        Report(machine_facts([], "wrk"), config(), {"sqlite": "ran"}, [row], [])
    )


def test_growth_notes_give_the_rate_and_the_cpu_per_request_at_each_size_with_their_spreads() -> None:
    def sized(size: str, rps: float, cpu: float) -> Row:
        row = _row("max", [wrk_run(20_000)], [wrk_run(rps, {"workers": cpu / 2, "ledger writer": cpu / 2})])
        row.backend = f"sqlite, {size} stored"
        return row

    rows = [sized("0", 10_000, 100.0), sized("1,000,000", 9_500, 104.0), sized("10,000,000", 8_500, 110.0)]
    (note,) = growth_notes(rows, (0, 1_000_000, 10_000_000))
    assert "10,000 / 9,500 / 8,500 req/s" in note and "spread 15.0%, NOT within 10%" in note
    cost = "CPU per request (adslot's processes and wrk): 100.0 / 104.0 / 110.0 µs, spread 9.1%."
    assert note.endswith(cost), note


def test_postgres_counters_are_summed_over_rounds_into_one_note_per_row_adslot_against_bare() -> None:
    def counted(rps: float, **moved: int) -> WrkResult:
        return msgspec.structs.replace(wrk_run(rps), postgres=dict(moved))

    adslot = [
        counted(10_000, checkpoints=1, **{"WAL bytes": 3 * 2**20, "full-page images": 40, "blocks read": 7}),
        counted(10_000, checkpoints=0, **{"WAL bytes": 2**20, "full-page images": 2, "blocks read": 0}),
    ]
    idle = counted(20_000, checkpoints=0, **{"WAL bytes": 2**19, "full-page images": 0, "blocks read": 0})
    bare = [idle, idle]
    row = Row("impression", "postgres", "max", "", Side.of(bare), Side.of(adslot), 0.5, ">= 0.7", False, [])
    (note,) = [n for n in notes([row]) if n.startswith("What PostgreSQL did")]
    assert note.endswith(
        "postgres impression: checkpoints 1 / 0 (0 / 0 buffers), WAL 4 / 1 MiB (42 / 0 full-page images), "
        "blocks read 7 / 0."
    )
    sqlite = _row("max", [wrk_run(20_000)], [wrk_run(10_000)])
    assert not [n for n in notes([sqlite]) if n.startswith("What PostgreSQL did")]


def test_the_disk_s_probed_flushes_are_one_note_of_each_round_s_p99_and_longest_adslot_against_bare() -> None:
    def probed(rps: float, p99_us: float, max_us: float) -> WrkResult:
        disk = {"syncs": 160, "p50_us": 300.0, "p99_us": p99_us, "max_us": max_us}
        return msgspec.structs.replace(wrk_run(rps), disk=disk)

    adslot = [probed(5_000, 900.0, 1_500.0), probed(5_000, 150_000.0, 431_200.0)]
    bare = [probed(9_000, 800.0, 1_000.0), wrk_run(9_000)]
    row = _row("half_load", bare, adslot)
    (note,) = [n for n in notes([row]) if n.startswith("The disk's own flushes")]
    assert note.endswith("sqlite impression @ half load: 0.9 / 1.5 · 150.0 / 431.2 | 0.8 / 1.0 · —."), (
        "each round in order; a round nothing probed shows a dash"
    )
    unprobed = _row("max", [wrk_run(20_000)], [wrk_run(10_000)])
    assert not [n for n in notes([unprobed]) if n.startswith("The disk's own flushes")]
