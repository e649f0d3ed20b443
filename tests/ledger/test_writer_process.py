"""The writer process's rule for what goes into its next transaction."""

from __future__ import annotations

from typing import cast

from adslot.ledger.writer_process import Client, Item, one_per_client

A, B, C = (cast(Client, object()) for _ in range(3))


def test_each_client_gets_one_batch_into_the_next_transaction_and_the_rest_wait_in_order() -> None:
    items: list[Item] = [(A, b"a1"), (B, b"b1"), (A, b"a2"), (C, b"c1"), (B, b"b2"), (A, b"a3")]
    now, later = one_per_client(items)
    assert now == [(A, b"a1"), (B, b"b1"), (C, b"c1")]
    assert later == [(A, b"a2"), (B, b"b2"), (A, b"a3")]
    now, later = one_per_client(later)
    assert now == [(A, b"a2"), (B, b"b2")]
    assert later == [(A, b"a3")]


def test_a_client_that_left_is_closed_only_after_its_last_batch() -> None:
    now, later = one_per_client([(A, b"a1"), (A, b"a2"), (A, None), (B, b"b1"), (B, None)])
    assert now == [(A, b"a1"), (B, b"b1"), (B, None)]
    assert later == [(A, b"a2"), (A, None)]
    now, later = one_per_client(later)
    assert now == [(A, b"a2"), (A, None)] and later == []


def test_wake_ups_are_dropped() -> None:
    assert one_per_client([(None, None), (A, b"a1"), (None, None)]) == ([(A, b"a1")], [])
