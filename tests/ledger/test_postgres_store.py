"""The PostgreSQL store's one statement for a batch's writes (its behaviour on a database is in the store
tests that run on both databases), and the page layout that keeps pixels' updates in place."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from itertools import combinations

import pytest

from adslot.environment import prepare_database
from adslot.ledger.postgres_store import WRITES, write_all
from adslot.ledger.records import Fire, Issue
from adslot.storage.database import make_engine
from tests.conftest import drop_schemas, free_port, make_settings
from tests.ledger.stores import PLAY, LedgerDatabase, record


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


@pytest.fixture(scope="module")
def postgres_ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LedgerDatabase]:
    """A migrated PostgreSQL ledger (never SQLite: the page layout below is PostgreSQL's)."""
    settings, schemas = make_settings(tmp_path_factory.mktemp("pg-ledger"), "postgres", free_port())
    env = settings.environment("production")
    prepare_database(env)
    engine = make_engine(env)
    yield LedgerDatabase("postgres", env, engine)
    engine.dispose()
    drop_schemas(schemas)


BATCH = 20


def _pages(db: LedgerDatabase) -> dict[uuid.UUID, int]:
    """Each ad request's heap page (the block of its row's current version)."""
    with db.engine.connect() as conn:
        rows = conn.exec_driver_sql("SELECT id, (ctid::text::point)[0]::int FROM ad_requests").all()
    return {ident: page for ident, page in rows}


def test_pixels_rewrite_an_ad_request_on_its_own_page_so_no_index_gains_an_entry(
    postgres_ledger: LedgerDatabase,
) -> None:
    db = postgres_ledger
    db.clear()
    with db.engine.connect() as conn:
        options = conn.exec_driver_sql("SELECT reloptions FROM pg_class WHERE oid = 'ad_requests'::regclass")
        assert options.scalar_one() == ["fillfactor=50"]
    issued = [record() for _ in range(400)]  # a dozen pages, inserted in id order as the ledger does
    db.apply([Issue(r) for r in issued])
    before = _pages(db)
    assert len(set(before.values())) > 5
    for n, event in enumerate(["impression", "start", "firstQuartile"]):
        for i in range(0, len(issued), BATCH):  # in batches of a busy group commit's size
            verdicts = db.apply([Fire(r.id, event, "wrapper", PLAY + n) for r in issued[i : i + BATCH]])
            assert {v.outcome for v in verdicts} == {"counted"}
    # Each row's new versions stayed on its page: HOT updates, which add no index entries. With pages packed
    # full (PostgreSQL's default), the first pixel on a full page moves its row to another page.
    assert _pages(db) == before
