"""The PostgreSQL store's one statement for a batch's writes (its behaviour on a database is in the store
tests that run on both databases), and the page layout that keeps pixels' updates in place."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from itertools import combinations

import pytest
import sqlalchemy as sa

from adslot.environment import prepare_database
from adslot.ledger.claims import Claim, Claims
from adslot.ledger.postgres_store import WRITES, update_arrays, update_sql, write_all
from adslot.ledger.records import Fire, Issue, Verdict
from adslot.ledger.resolve import RowChange
from adslot.ledger.store import TIME_COLUMNS, LedgerStore
from adslot.storage.database import make_engine
from adslot.storage.tables import delivery_counters
from tests.conftest import drop_schemas, free_port, make_settings
from tests.ledger.stores import PLAY, LedgerDatabase, record


def parameters(sql: str) -> list[int]:
    return sorted({int(n) for n in re.findall(r"\$(\d+)", sql)})


ALL_WRITES = {**WRITES, "update": update_sql(("impression_at", "complete_at"), True)}


def test_each_write_keeps_its_own_parameters_numbered_on_from_the_ones_before() -> None:
    for size in range(1, len(ALL_WRITES) + 1):
        for names in combinations(ALL_WRITES, size):
            sql = write_all(tuple((name, ALL_WRITES[name]) for name in names))
            expected = sum(len(parameters(ALL_WRITES[name])) for name in names)
            assert parameters(sql) == list(range(1, expected + 1)), names
            assert all(f"written_{name} AS (" in sql for name in names)


def test_it_counts_the_answers_it_stored_and_nothing_without_them() -> None:
    answers = ("answers", WRITES["answers"])
    assert write_all((("insert", WRITES["insert"]), answers)).endswith(
        "SELECT (SELECT count(*) FROM written_answers)"
    )
    assert write_all((("update", ALL_WRITES["update"]),)).endswith("SELECT 0")
    counters, insert = WRITES["counters"], WRITES["insert"]
    shifted = write_all((("counters", counters), ("insert", insert)))
    assert counters in shifted, "the first write's parameters are left as they are"
    assert insert not in shifted and "$6::uuid[]" in shifted, "the second's start after the first's five"


def _change(**fields: object) -> RowChange:
    return RowChange(**fields)  # type: ignore[arg-type]


def test_a_batch_of_first_impressions_updates_only_their_time_and_fired_bits() -> None:
    changes = [(uuid.uuid4(), _change(set_times={"impression_at": 10 + i}, fired=1)) for i in range(3)]
    sql, arrays = update_arrays(changes)
    assert parameters(sql) == [1, 2, 3]
    assert "impression_at = COALESCE(ad_requests.impression_at, c.impression_at)" in sql
    assert "duplicate_count" not in sql and "settled_at" not in sql and "start_at" not in sql
    assert arrays == [[10, 11, 12], [1, 1, 1], [ident for ident, _ in changes]]


def test_a_batch_of_several_events_sets_every_time_column_each_row_null_where_it_sets_nothing() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    changes = [
        (a, _change(set_times={"complete_at": 7}, fired=64)),
        (b, _change(duplicates=2)),
        (c, _change(settled_at=9, settle_reason="expired", set_times={"impression_at": 5}, fired=1)),
    ]
    sql, arrays = update_arrays(changes)
    assert sql == update_sql((*TIME_COLUMNS, "settled_at", "settle_reason"), True)
    assert TIME_COLUMNS[0] == "impression_at" and TIME_COLUMNS[-1] == "complete_at"
    assert arrays == [
        [None, None, 5],
        *[[None, None, None]] * (len(TIME_COLUMNS) - 2),
        [7, None, None],
        [None, None, 9],
        [None, None, "expired"],
        [0, 2, 0],
        [0, 0, 0],
        [64, 0, 1],
        [a, b, c],
    ]


def test_there_are_few_enough_update_statements_for_asyncpgs_statement_cache() -> None:
    update_sql.cache_clear()
    for event in (None, *TIME_COLUMNS, "several"):
        times = {} if event is None else {c: 1 for c in TIME_COLUMNS} if event == "several" else {event: 1}
        for settle in (None, "expired"):
            for dups in (0, 1):
                change = _change(set_times=times, duplicates=dups, settle_reason=settle)
                update_arrays([(uuid.uuid4(), change)])
    assert update_sql.cache_info().currsize == 32, "no event, each one, all six; x settlement x counters"


def test_a_batch_of_repeats_alone_adds_to_the_counters_and_sets_no_time() -> None:
    sql, arrays = update_arrays([(uuid.uuid4(), _change(duplicates=1, late=1))])
    assert "COALESCE" not in sql and "duplicate_count = ad_requests.duplicate_count + c.dups" in sql
    assert parameters(sql) == [1, 2, 3, 4] and arrays[:3] == [[1], [1], [0]]


def test_an_echo_from_the_other_vast_layer_sets_only_its_fired_bit() -> None:
    ident = uuid.uuid4()
    sql, arrays = update_arrays([(ident, _change(fired=2))])
    assert sql.startswith("UPDATE ad_requests SET fired = ad_requests.fired | c.fired FROM unnest(")
    assert parameters(sql) == [1, 2] and arrays == [[2], [ident]]


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


def test_an_impression_on_a_capped_ad_request_commits_while_another_transaction_holds_its_counter(
    postgres_ledger: LedgerDatabase,
) -> None:
    """The counter rows a campaign's ad requests all claim are the ledger's hottest locks; a pixel never
    waits for them (its reservation is delivered when the sweep settles the ad request)."""
    db = postgres_ledger
    key = f"c9:life:{uuid.uuid4().hex}"
    claims = Claims((Claim(key, 1, 5),))
    rec = record(claims=claims)
    db.apply([Issue(rec, claims)])

    async def fire(store: LedgerStore) -> list[Verdict]:
        return await asyncio.wait_for(store.apply([Fire(rec.id, "impression", "wrapper", PLAY + 1)]), 10)

    with db.engine.begin() as conn:
        locked = conn.execute(
            sa.select(delivery_counters.c.reserved).where(delivery_counters.c.key == key).with_for_update()
        ).scalar_one()
        [verdict] = db.run(fire)
    assert (locked, verdict.outcome) == (1, "counted")
    assert db.counters()[key] == (5, 1, 0, None)
