"""The simulator drives the real engine and SQLite ledger over a virtual clock; its figures are the proof that
goals are met, even pacing holds hour by hour, and nothing is ever delivered above a cap."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from adslot.cli import main
from adslot.simulation.report import SimulationReport
from adslot.simulation.run import SimulationConfig, simulate

pytestmark = pytest.mark.slow("compute")  # simulations of hours to days of slots: seconds of CPU each


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> SimulationReport:
    config = SimulationConfig(screens=100, campaigns=20, hours=12)
    return asyncio.run(simulate(config, tmp_path_factory.mktemp("simulation")))


def test_no_campaign_is_ever_delivered_above_a_cap(report: SimulationReport) -> None:
    assert [(f.campaign.id, f.over_delivery, f.counter_violations) for f in report.campaigns] == [
        (f.campaign.id, 0, 0) for f in report.campaigns
    ]


def test_every_slot_fills_when_house_campaigns_run_everywhere(report: SimulationReport) -> None:
    assert report.requests == 100 * 12 * 3600 // 300
    assert report.fills == report.requests


def test_even_campaigns_stay_within_ten_percent_of_plan_in_every_hour_after_the_first(
    report: SimulationReport,
) -> None:
    even = [f for f in report.campaigns if f.campaign.pacing == "even" and f.pacing_errors]
    assert len(even) >= 8
    worst = {f.campaign.id: f.worst_pacing_error for f in even}
    assert all(abs(error) <= 0.10 for error in worst.values() if error is not None), worst


def test_capped_campaigns_reach_their_goal_despite_lost_and_late_proof_of_play(
    report: SimulationReport,
) -> None:
    """3% of PoPs never arrive and 2% arrive late; their reservations return at expiry and are sold again."""
    lifetime = [f for f in report.campaigns if f.goal is not None and f.goal.period == "lifetime"]
    shares = {f.campaign.id: f.goal_share for f in lifetime if f.campaign.hours_of_week.bit_count() == 168}
    assert shares and all(share is not None and share >= 0.97 for share in shares.values()), shares


def test_the_simulate_command_prints_the_delivery_table(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["simulate", "--screens", "10", "--campaigns", "20", "--hours", "2", "--data-dir", str(tmp_path)],
    )
    assert result.exit_code == 0, result.output
    assert "| campaign | tier | pacing | goal |" in result.output
    assert "over-delivery 0" in result.output
