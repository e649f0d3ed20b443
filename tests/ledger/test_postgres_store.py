"""The PostgreSQL store's one statement for a batch's writes (its behaviour on a database is in the store
tests that run on both databases)."""

from __future__ import annotations

import re
from itertools import combinations

from adslot.ledger.postgres_store import WRITES, write_all


def parameters(sql: str) -> list[int]:
    return sorted({int(n) for n in re.findall(r"\$(\d+)", sql)})


def test_each_write_keeps_its_own_parameters_numbered_on_from_the_ones_before() -> None:
    for size in range(1, len(WRITES) + 1):
        for parts in combinations(WRITES, size):
            sql = write_all(parts)
            expected = sum(len(parameters(WRITES[name])) for name in parts)
            assert parameters(sql) == list(range(1, expected + 1)), parts
            assert all(f"written_{name} AS (" in sql for name in parts)


def test_it_counts_the_answers_it_stored_and_nothing_without_them() -> None:
    assert write_all(("insert", "answers")).endswith("SELECT (SELECT count(*) FROM written_answers)")
    assert write_all(("update",)).endswith("SELECT 0")
    counters, insert = WRITES["counters"], WRITES["insert"]
    shifted = write_all(("counters", "insert"))
    assert counters in shifted, "the first write's parameters are left as they are"
    assert insert not in shifted and "$6::uuid[]" in shifted, "the second's start after the first's five"
