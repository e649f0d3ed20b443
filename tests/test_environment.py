"""How many write batches a worker keeps in flight: the writer's own number unless the operator sets one."""

from __future__ import annotations

from pathlib import Path

from adslot.environment import IN_FLIGHT, SQLITE_WRITER_IN_FLIGHT, batches_in_flight
from adslot.settings import load_settings

POSTGRES = {"ADSLOT_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/test"}


def _in_flight(tmp_path: Path, **environ: str) -> int:
    settings = load_settings({"ADSLOT_DATA_DIR": str(tmp_path), **environ})
    return batches_in_flight(settings, settings.environment("production"))


def test_a_sqlite_writer_process_gets_more_batches_in_flight_since_it_merges_them_all(tmp_path: Path) -> None:
    assert _in_flight(tmp_path) == SQLITE_WRITER_IN_FLIGHT > IN_FLIGHT


def test_postgres_lanes_and_the_thread_writer_keep_two_in_flight(tmp_path: Path) -> None:
    assert _in_flight(tmp_path, **POSTGRES) == IN_FLIGHT == 2
    assert _in_flight(tmp_path, ADSLOT_LEDGER_WRITER="thread") == IN_FLIGHT


def test_the_operators_number_wins_on_every_writer(tmp_path: Path) -> None:
    assert _in_flight(tmp_path, ADSLOT_BATCHES_IN_FLIGHT="3") == 3
    assert _in_flight(tmp_path, ADSLOT_BATCHES_IN_FLIGHT="5", **POSTGRES) == 5
