"""bench.postgres reads PostgreSQL's own counters, which the report uses to say what the server did during a
run besides answering (checkpoints, WAL, blocks read)."""

from __future__ import annotations

import secrets

import psycopg
from bench.postgres import activity

from tests.conftest import eventually, require_postgres


def test_activity_counts_the_wal_a_write_makes_and_a_checkpoint() -> None:
    url = require_postgres()
    table = f"bench_activity_{secrets.token_hex(4)}"
    before = activity(url)
    assert {"checkpoints", "checkpoint buffers", "WAL bytes", "full-page images", "blocks read"} <= set(
        before
    )
    with psycopg.connect(url, autocommit=True) as conn:
        try:
            conn.execute(
                f"CREATE TABLE {table} AS "
                "SELECT g AS n, repeat('x', 200) AS pad FROM generate_series(1, 20000) g"
            )
            conn.execute("CHECKPOINT")
        finally:
            conn.execute(f"DROP TABLE IF EXISTS {table}")

    def moved() -> bool:
        # 20,000 rows of over 200 bytes: at least 4 MB of WAL. PostgreSQL publishes its counters a little
        # after the work: a backend's when it goes idle or exits, the checkpointer's after CHECKPOINT returns.
        after = activity(url)
        return (
            after["WAL bytes"] - before["WAL bytes"] > 4_000_000
            and after["checkpoints"] > before["checkpoints"]
        )

    assert eventually(moved, timeout=10), (before, activity(url))
