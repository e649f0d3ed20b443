"""How many write batches a worker keeps in flight: the writer's own number unless the operator sets one."""

from __future__ import annotations

from adslot.environment import IN_FLIGHT, WRITER_PROCESS_IN_FLIGHT, batches_in_flight
from adslot.settings import load_settings

POSTGRES = {"ADSLOT_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/test"}


def test_a_writer_process_gets_more_batches_in_flight_since_it_merges_every_frame_waiting() -> None:
    assert batches_in_flight(load_settings({})) == WRITER_PROCESS_IN_FLIGHT > IN_FLIGHT
    assert batches_in_flight(load_settings(POSTGRES)) == WRITER_PROCESS_IN_FLIGHT


def test_the_thread_writer_applying_each_batch_alone_keeps_two_in_flight() -> None:
    assert batches_in_flight(load_settings({"ADSLOT_LEDGER_WRITER": "thread"})) == IN_FLIGHT == 2


def test_the_operators_number_wins_on_every_writer() -> None:
    assert batches_in_flight(load_settings({"ADSLOT_BATCHES_IN_FLIGHT": "3"})) == 3
    thread = {"ADSLOT_BATCHES_IN_FLIGHT": "5", "ADSLOT_LEDGER_WRITER": "thread"}
    assert batches_in_flight(load_settings(thread)) == 5
