"""The machine's flush cost and stolen CPU, as every report's header states them."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import hostcost, report
from tests.conftest import eventually


def test_sync_cost_times_every_flush_in_the_given_directory_and_leaves_no_file(tmp_path: Path) -> None:
    cost = hostcost.sync_cost(tmp_path, count=20)
    assert cost is not None
    assert 0 < cost.p50_us <= cost.p99_us
    assert cost.cpu_us > 0
    assert list(tmp_path.iterdir()) == []


def test_sync_cost_is_none_where_the_directory_cannot_be_written(tmp_path: Path) -> None:
    assert hostcost.sync_cost(tmp_path / "missing", count=3) is None


def test_steal_share_is_the_stolen_part_of_the_ticks_between_two_readings() -> None:
    assert hostcost.steal_share((100, 10_000), (130, 10_600)) == pytest.approx(0.05)
    assert hostcost.steal_share((100, 10_000), (100, 10_000)) is None


def test_steal_ticks_are_the_steal_column_and_the_sum_of_all_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/proc/stat").exists():
        pytest.skip("no /proc/stat on this system")
    steal, total = hostcost.steal_ticks()
    assert 0 <= steal <= total and total > 0
    assert len(hostcost.cpu_ticks()) == 8
    monkeypatch.setattr(hostcost, "cpu_ticks", lambda: [10, 1, 20, 900, 5, 2, 3, 59])
    assert hostcost.steal_ticks() == (59, 1000)


def test_the_report_header_states_the_flush_cost_and_the_steal() -> None:
    facts = report.machine_facts([], "wrk")
    report.finish(facts)
    assert facts.sync is not None
    assert facts.steal is None or 0 <= facts.steal <= 1
    facts.steal = 0.031
    header = "\n".join(report.machine_lines(facts))
    assert f"p50 {facts.sync.p50_us:,.0f} µs" in header
    assert "steal) during the run: 3.1%" in header


def test_the_sync_probe_times_a_flush_each_interval_while_it_runs_and_leaves_no_file(tmp_path: Path) -> None:
    interval = 0.01
    started = time.monotonic()
    with hostcost.SyncProbe(tmp_path, interval_s=interval) as probe:
        # A flush can stall for hundreds of ms on a busy virtual disk: wait for five, however long they take.
        assert eventually(lambda: probe.summary().get("syncs", 0) >= 5, 30.0), probe.summary()
        assert len(list(tmp_path.iterdir())) == 1, "one file, rewritten in place"
    elapsed = time.monotonic() - started
    summary = probe.summary()
    assert 5 <= summary["syncs"] <= elapsed / interval, "at most one flush an interval"
    assert 0 < summary["p50_us"] <= summary["p99_us"] <= summary["max_us"]
    assert list(tmp_path.iterdir()) == []


def test_the_sync_probe_summary_is_empty_where_it_timed_fewer_than_two_flushes(tmp_path: Path) -> None:
    with hostcost.SyncProbe(tmp_path / "missing", interval_s=0.01) as unwritable:
        time.sleep(0.05)
    assert unwritable.summary() == {}
    with hostcost.SyncProbe(tmp_path, interval_s=60) as idle:
        pass
    assert idle.summary() == {}
    assert list(tmp_path.iterdir()) == []
