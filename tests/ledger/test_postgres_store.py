"""The PostgreSQL store's one statement for a batch's writes (its behaviour on a database is in the store
tests that run on both databases), the page layout that keeps pixels' updates in place, and what its writer
remembers: a batch on remembered ad requests is one statement that locks nothing first, and is applied
again, read and locked, when another node changed one of them."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from itertools import combinations
from typing import Any

import pytest
import sqlalchemy as sa

from adslot.environment import prepare_database
from adslot.ledger import postgres_store
from adslot.ledger.claims import Claim, Claims
from adslot.ledger.postgres_store import (
    WRITES,
    PostgresLedgerStore,
    event_bits,
    update_arrays,
    update_sql,
    write_all,
)
from adslot.ledger.records import (
    EVENT_COLUMNS,
    FIRE_BITS,
    ISSUE_COLUMNS,
    AlreadyAnswered,
    Fire,
    Issue,
    Receipt,
    Release,
    Verdict,
)
from adslot.ledger.resolve import Current, RowChange
from adslot.ledger.store import TIME_COLUMNS, LedgerStore
from adslot.storage.database import asyncpg_dsn, make_engine
from adslot.storage.failures import OutcomeUnknown, unavailable
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
    for event in (None, *TIME_COLUMNS, "several"):
        times = {} if event is None else {c: 1 for c in TIME_COLUMNS} if event == "several" else {event: 1}
        for dups in (0, 1):
            ident = uuid.uuid4()
            update_arrays([(ident, _change(set_times=times, duplicates=dups))], {ident: Current(0)})
    assert update_sql.cache_info().currsize == 48, "and the unsettled ones checked against remembered states"


def test_a_checked_update_goes_in_id_order_and_updates_only_rows_whose_counted_events_are_as_remembered() -> (
    None
):
    low, high = uuid.UUID(int=1), uuid.UUID(int=2)
    changes = [(high, _change(fired=0b1)), (low, _change(fired=0b1))]
    # low: the start (0b100) and the inline impression (0b10) remembered; only the latter is checked.
    sql, arrays = update_arrays(changes, {low: Current(0, fired=0b110), high: Current(0, fired=0)})
    assert sql.endswith(
        "WHERE ad_requests.id = c.id AND (ad_requests.fired & c.mask) = c.was "
        "AND ad_requests.settle_reason IS NULL RETURNING 1"
    )
    assert arrays == [[1, 1], [low, high], [0b11, 0b11], [0b10, 0]]


def test_the_checked_bits_are_both_layers_of_each_event_a_batch_counts_and_nothing_else() -> None:
    for n, event in enumerate(EVENT_COLUMNS):
        pair = 0b11 << 2 * n
        assert event_bits(FIRE_BITS[event, "wrapper"]) == event_bits(FIRE_BITS[event, "inline"]) == pair
    assert event_bits(0) == 0
    every = sum(FIRE_BITS.values())
    assert (
        event_bits(FIRE_BITS["impression", "inline"] | FIRE_BITS["complete", "wrapper"]) == 0b11 | 0b11 << 10
    )
    assert event_bits(every) == every


def test_a_checked_statement_ends_by_comparing_what_it_wrote_with_what_it_meant_to() -> None:
    update = update_sql(("impression_at",), False, True)
    sql = write_all((("update", update), ("answers", WRITES["answers"])), checked=True)
    assert sql.endswith(
        "SELECT ledger_written((SELECT count(*) FROM written_update), $11, "
        "(SELECT count(*) FROM written_answers), $12)"
    )
    insert = write_all((("insert", WRITES["insert"]),), checked=True)
    assert insert.endswith(
        f"SELECT ledger_written(0, ${len(ISSUE_COLUMNS) + 1}, 0, ${len(ISSUE_COLUMNS) + 2})"
    )


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


# PostgreSQL prunes a page's dead row versions only past the oldest snapshot of any session of the database:
# tests running beside it in parallel workers would hold that back and move rows. The serial suite runs it.
@pytest.mark.slow("alone: needs the database to itself")
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


Scenario = Callable[[PostgresLedgerStore, PostgresLedgerStore, list[str]], Awaitable[None]]


def two_nodes(db: LedgerDatabase, scenario: Scenario) -> None:
    """Run `scenario` with this writer's store (every statement it sends recorded) and another node's."""

    async def main() -> None:
        ours, theirs = (
            PostgresLedgerStore(asyncpg_dsn(db.env.database_url), db.env.database_schema, pool_size=2)
            for _ in range(2)
        )
        await ours.start()
        await theirs.start()
        seen: list[str] = []
        assert ours._connections is not None
        pool = ours._connections.pool
        held = [await pool.acquire() for _ in range(2)]  # the whole pool: every connection it will use
        for conn in held:
            conn.add_query_logger(lambda logged: seen.append(logged.query) if ours_(logged.query) else None)
            await pool.release(conn)
        logged_after(ours)
        try:
            await scenario(ours, theirs, seen)
        finally:
            await ours.close()
            await theirs.close()

    asyncio.run(main())


def logged_after(store: PostgresLedgerStore) -> None:
    """Let asyncpg's query loggers run before each write of `store` returns: asyncpg calls them with
    call_soon once a statement is done, and a kept connection's lease ends without a turn of the loop."""
    for name in ("apply", "apply_frames"):
        write = getattr(store, name)

        async def then_logged(*args: object, _write: Callable[..., Awaitable[object]] = write) -> object:
            try:
                return await _write(*args)
            finally:
                await asyncio.sleep(0)

        setattr(store, name, then_logged)


def ours_(query: str) -> bool:
    """Not one of asyncpg's own queries, which learn the types of a statement's parameters the first time a
    connection prepares it (and switch JIT off around them)."""
    return not any(mark in query for mark in ("pg_type", "pg_catalog", "'jit'"))


def outcomes(verdicts: list[Verdict]) -> list[str]:
    return [v.outcome for v in verdicts]


WAITING_ON = """
WITH RECURSIVE waiting(pid) AS (
    SELECT pid FROM pg_stat_activity WHERE $1::int = ANY(pg_blocking_pids(pid))
    UNION SELECT a.pid FROM pg_stat_activity a JOIN waiting w ON w.pid = ANY(pg_blocking_pids(a.pid))
)
SELECT {} FROM waiting"""
"""The sessions waiting on a lock that the session $1 (row_held()'s) holds, or on one queued behind it: this
test's own, whatever other tests run on the same server at the same time."""


@asynccontextmanager
async def row_held(store: PostgresLedgerStore, ident: uuid.UUID) -> AsyncIterator[int]:
    """Another node's transaction holding the ad request's row lock, so whatever this writer sends on it
    waits in the database until the block ends; yields the holding session's process id."""
    assert store._connections is not None
    async with store._connections.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM ad_requests WHERE id = $1 FOR UPDATE", ident)
        yield conn.get_server_pid()


async def lock_waiters(store: PostgresLedgerStore, holder: int) -> int:
    assert store._connections is not None
    return int(await store._connections.pool.fetchval(WAITING_ON.format("count(*)"), holder))


def test_fires_on_remembered_ad_requests_are_one_statement_that_locks_nothing_first(
    postgres_ledger: LedgerDatabase,
) -> None:
    made = [record() for _ in range(3)]

    async def scenario(ours: PostgresLedgerStore, _: PostgresLedgerStore, seen: list[str]) -> None:
        assert outcomes(await ours.apply([Issue(r) for r in made])) == ["issued"] * 3
        assert len(seen) == 1 and "ledger_written(" in seen[0], seen
        seen.clear()
        fires = [Fire(r.id, "impression", "wrapper", PLAY) for r in made]
        assert outcomes(await ours.apply([*fires, fires[0]])) == ["counted"] * 3 + ["duplicate"]
        assert len(seen) == 1, seen
        assert "FOR UPDATE" not in seen[0] and "ledger_written(" in seen[0]

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    rows = postgres_ledger.rows()
    assert [(rows[r.id]["impression_at"], rows[r.id]["fired"]) for r in made] == [(PLAY, 1)] * 3
    assert [rows[r.id]["duplicate_count"] for r in made] == [1, 0, 0]


def test_a_batch_sent_while_another_is_in_flight_is_resolved_on_what_that_one_leaves(
    postgres_ledger: LedgerDatabase,
) -> None:
    """A player's quartiles a moment apart, in two batches in two lanes at once: the second is resolved on
    the first's outcome and goes as its one checked statement too, never read, locked and applied again."""
    made = record()

    async def scenario(ours: PostgresLedgerStore, _: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(made)])
        seen.clear()
        first = [Fire(made.id, "impression", "wrapper", PLAY), Fire(made.id, "start", "wrapper", PLAY)]
        second = [
            Fire(made.id, "start", "wrapper", PLAY + 1),
            Fire(made.id, "firstQuartile", "wrapper", PLAY + 2),
        ]
        both = await asyncio.gather(ours.apply(first), ours.apply(second))
        assert [outcomes(v) for v in both] == [["counted", "counted"], ["duplicate", "counted"]]
        assert len(seen) == 2 and not any("FOR UPDATE" in q for q in seen), seen

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["start_at"], row["first_quartile_at"]) == (PLAY, PLAY, PLAY + 2)
    assert row["duplicate_count"] == 1


def test_a_batch_waiting_on_one_that_fails_resolves_on_what_was_committed(
    postgres_ledger: LedgerDatabase,
) -> None:
    """The first batch is a resent frame committed before, so it fails: the second, on the same ad request,
    must count its start, not call it a duplicate of the start the failed one would have written."""
    made = record()
    frame = Receipt(b"w" * 16, 7, PLAY, 0, 1)

    async def scenario(ours: PostgresLedgerStore, _: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(made)])
        await ours.apply_frames([Fire(made.id, "impression", "wrapper", PLAY)], [frame])
        resent = ours.apply_frames([Fire(made.id, "start", "wrapper", PLAY)], [frame])
        fresh = ours.apply([Fire(made.id, "start", "wrapper", PLAY + 1)])
        refused, counted = await asyncio.gather(resent, fresh, return_exceptions=True)
        assert isinstance(refused, AlreadyAnswered)
        assert not isinstance(counted, BaseException) and outcomes(counted) == ["counted"]

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["start_at"], row["duplicate_count"]) == (PLAY, PLAY + 1, 0)


def test_a_batch_waits_for_one_in_flight_on_the_same_event_of_an_ad_request_and_no_other(
    postgres_ledger: LedgerDatabase,
) -> None:
    """Another transaction holds one ad request's row, so this writer's impression on it stays in flight:
    an impression on another ad request still commits, and the other VAST layer's impression on the held
    one is not even sent until the one ahead of it is done, then goes as its one checked statement, an
    echo of it."""
    held, other = record(), record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(held), Issue(other)])
        seen.clear()
        async with row_held(theirs, held.id) as holder:
            blocked = asyncio.ensure_future(ours.apply([Fire(held.id, "impression", "wrapper", PLAY)]))
            free = await asyncio.wait_for(ours.apply([Fire(other.id, "impression", "wrapper", PLAY)]), 10)
            assert outcomes(free) == ["counted"]
            after = asyncio.ensure_future(ours.apply([Fire(held.id, "impression", "inline", PLAY + 1)]))
            await asyncio.sleep(0.3)
            assert not blocked.done() and not after.done()
            assert await lock_waiters(theirs, holder) == 1, (
                "the echo waits in the writer, not in the database"
            )
        assert outcomes(await asyncio.wait_for(blocked, 10)) == ["counted"]
        assert outcomes(await asyncio.wait_for(after, 10)) == ["echo"]
        assert len(seen) == 3 and not any("FOR UPDATE" in q for q in seen), seen

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    rows = postgres_ledger.rows()
    assert (rows[held.id]["impression_at"], rows[held.id]["fired"]) == (PLAY, 0b11)
    assert rows[other.id]["impression_at"] == PLAY


def test_batches_in_flight_on_other_events_of_one_ad_request_go_at_once_and_each_counts_in_one_statement(
    postgres_ledger: LedgerDatabase,
) -> None:
    """A player's impression and start, a moment apart, in two batches: neither waits for the other in the
    writer (both wait on the held row in the database), both commit in their one checked statement, and
    the writer remembers both fires."""
    held = record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(held)])
        seen.clear()
        async with row_held(theirs, held.id) as holder:
            first = asyncio.ensure_future(ours.apply([Fire(held.id, "impression", "wrapper", PLAY)]))
            second = asyncio.ensure_future(ours.apply([Fire(held.id, "start", "wrapper", PLAY + 1)]))
            for _ in range(200):  # until both have reached the database (a loaded machine sends later)
                if await lock_waiters(theirs, holder) == 2:
                    break
                await asyncio.sleep(0.05)
            assert not first.done() and not second.done()
            assert await lock_waiters(theirs, holder) == 2, "both are in the database, waiting on the row"
        assert outcomes(await asyncio.wait_for(first, 10)) == ["counted"]
        assert outcomes(await asyncio.wait_for(second, 10)) == ["counted"]
        assert len(seen) == 2 and not any("FOR UPDATE" in q for q in seen), "neither went again"
        seen.clear()
        repeats = [
            Fire(held.id, "impression", "wrapper", PLAY + 2),
            Fire(held.id, "start", "wrapper", PLAY + 2),
        ]
        assert outcomes(await ours.apply(repeats)) == ["duplicate", "duplicate"]
        assert len(seen) == 1 and "FOR UPDATE" not in seen[0], "both fires remembered"

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[held.id]
    assert (row["impression_at"], row["start_at"], row["fired"], row["duplicate_count"]) == (
        PLAY,
        PLAY + 1,
        0b101,
        2,
    )


def test_a_fire_of_another_event_another_node_counted_meanwhile_does_not_make_a_batch_go_again(
    postgres_ledger: LedgerDatabase,
) -> None:
    made = record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(made)])
        assert outcomes(await theirs.apply([Fire(made.id, "start", "wrapper", PLAY)])) == ["counted"]
        seen.clear()
        assert outcomes(await ours.apply([Fire(made.id, "impression", "wrapper", PLAY + 1)])) == ["counted"]
        assert len(seen) == 1 and "FOR UPDATE" not in seen[0], seen

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["start_at"], row["fired"]) == (PLAY + 1, PLAY, 0b101)


def test_a_fire_another_node_counted_meanwhile_is_a_duplicate_and_the_rest_of_the_batch_counts_once(
    postgres_ledger: LedgerDatabase,
) -> None:
    """This writer remembers both ad requests unfired; the other node counts one's impression. The checked
    statement must fail as a whole: had it kept the other row's update, applying the batch again would find
    that impression fired and call it a duplicate."""
    first, second = record(), record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(first), Issue(second)])
        assert outcomes(await theirs.apply([Fire(first.id, "impression", "wrapper", PLAY)])) == ["counted"]
        seen.clear()
        both = [Fire(r.id, "impression", "wrapper", PLAY + 1) for r in (first, second)]
        assert outcomes(await ours.apply(both)) == ["duplicate", "counted"]
        assert any("FOR UPDATE" in q for q in seen), "applied again, read and locked"
        seen.clear()
        later = [Fire(r.id, "start", "wrapper", PLAY + 2) for r in (first, second)]
        assert outcomes(await ours.apply(later)) == ["counted", "counted"]
        assert not any("FOR UPDATE" in q for q in seen), "what it read and locked, it remembers again"

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    rows = postgres_ledger.rows()
    assert (rows[first.id]["impression_at"], rows[first.id]["duplicate_count"]) == (PLAY, 1)
    assert (rows[second.id]["impression_at"], rows[second.id]["duplicate_count"]) == (PLAY + 1, 0)


def test_a_fire_on_an_ad_request_another_node_released_is_not_counted(
    postgres_ledger: LedgerDatabase,
) -> None:
    made = record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, _: list[str]) -> None:
        await ours.apply([Issue(made)])
        assert outcomes(await theirs.apply([Release(made.id, made.account_id, PLAY - 10)])) == ["released"]
        assert outcomes(await ours.apply([Fire(made.id, "impression", "wrapper", PLAY)])) == ["released"]

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["fired"], row["late_count"]) == (None, 0, 1)


def test_a_resent_frame_committed_before_is_refused_by_the_unlocked_statement_and_writes_nothing(
    postgres_ledger: LedgerDatabase,
) -> None:
    made = record()
    frame = Receipt(b"w" * 16, 7, PLAY, 0, 1)

    async def scenario(ours: PostgresLedgerStore, _: PostgresLedgerStore, seen: list[str]) -> None:
        await ours.apply([Issue(made)])
        fire = [Fire(made.id, "impression", "wrapper", PLAY)]
        await ours.apply_frames(fire, [frame])
        seen.clear()
        with pytest.raises(AlreadyAnswered):
            await ours.apply_frames(fire, [frame])
        assert len(seen) == 1 and "ledger_written(" in seen[0], "refused by the one statement"
        assert await ours.answer(frame.client, frame.seq) is not None

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["duplicate_count"]) == (PLAY, 0)


def test_fires_on_ad_requests_another_node_issued_are_one_unlocked_read_and_one_checked_statement(
    postgres_ledger: LedgerDatabase,
) -> None:
    """A pixel reaching another worker than the one that issued its ad request (or one older than the
    memory): its state is read without a lock or a transaction, then the batch goes as the one checked
    statement, and is remembered from there on. A fire on an id with no row is unknown."""
    made = [record() for _ in range(2)]
    nowhere = uuid.uuid4()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        assert outcomes(await theirs.apply([Issue(r) for r in made])) == ["issued"] * 2
        fires = [Fire(r.id, "impression", "wrapper", PLAY) for r in made]
        verdicts = await ours.apply([*fires, Fire(nowhere, "impression", "wrapper", PLAY)])
        assert outcomes(verdicts) == ["counted", "counted", "unknown"]
        assert len(seen) == 2, seen
        assert "FOR UPDATE" not in seen[0] and "ledger_written(" in seen[1]
        assert not any(q.strip().upper() in ("BEGIN", "COMMIT") for q in seen)
        seen.clear()
        starts = [Fire(r.id, "start", "wrapper", PLAY + 1) for r in made]
        assert outcomes(await ours.apply([*starts, fires[0]])) == ["counted", "counted", "duplicate"]
        assert len(seen) == 1 and "ledger_written(" in seen[0], "what it read, it now remembers"

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    rows = postgres_ledger.rows()
    assert [(rows[r.id]["impression_at"], rows[r.id]["start_at"]) for r in made] == [(PLAY, PLAY + 1)] * 2
    assert [rows[r.id]["duplicate_count"] for r in made] == [1, 0]
    assert nowhere not in rows


def test_a_fire_another_node_counts_between_the_unlocked_read_and_the_write_is_a_duplicate_counted_once(
    postgres_ledger: LedgerDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other node commits the same impression just after this writer read the row: the checked
    statement finds the row changed and writes nothing, and the batch is read, locked and applied again, so
    the impression is counted once and this fire is its duplicate."""
    made = record()
    read = postgres_store._read_unlocked

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        assert outcomes(await theirs.apply([Issue(made)])) == ["issued"]

        async def then_theirs_counts(*args: Any) -> bool:
            result = await read(*args)
            counted = await theirs.apply([Fire(made.id, "impression", "wrapper", PLAY)])
            assert outcomes(counted) == ["counted"]
            return result

        monkeypatch.setattr(postgres_store, "_read_unlocked", then_theirs_counts)
        fire = [Fire(made.id, "impression", "wrapper", PLAY + 5)]
        assert outcomes(await ours.apply(fire)) == ["duplicate"]
        assert any("FOR UPDATE" in q for q in seen), "applied again, read and locked"

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["fired"], row["duplicate_count"]) == (PLAY, 1, 1)


def test_a_fire_on_a_settled_ad_request_this_writer_never_saw_is_read_and_locked_and_not_counted(
    postgres_ledger: LedgerDatabase,
) -> None:
    made = record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, seen: list[str]) -> None:
        await theirs.apply([Issue(made)])
        assert outcomes(await theirs.apply([Release(made.id, made.account_id, PLAY - 10)])) == ["released"]
        assert outcomes(await ours.apply([Fire(made.id, "impression", "wrapper", PLAY)])) == ["released"]
        assert any("FOR UPDATE" in q for q in seen), "a settled row is read and locked"

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    row = postgres_ledger.rows()[made.id]
    assert (row["impression_at"], row["fired"], row["late_count"]) == (None, 0, 1)


async def terminate_the_waiting_backend(store: PostgresLedgerStore, holder: int) -> None:
    """End the one session waiting on a row lock (ours, held up by another transaction), as a server
    restart or a network cut would."""
    assert store._connections is not None
    pool = store._connections.pool
    for _ in range(100):
        ended = await pool.fetchval(WAITING_ON.format("count(pg_terminate_backend(pid))"), holder)
        if ended:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no session waited on the lock")


def test_a_write_whose_connection_dies_while_it_may_commit_is_an_outcome_unknown(
    postgres_ledger: LedgerDatabase,
) -> None:
    """The fire's one statement is in the database when its session ends: the store cannot know whether it
    committed, so it says so (a 503 the player retries; the group committer does not apply it again)."""
    made = record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, _: list[str]) -> None:
        await ours.apply([Issue(made)])
        async with row_held(theirs, made.id) as holder:
            fire = asyncio.ensure_future(ours.apply([Fire(made.id, "impression", "wrapper", PLAY)]))
            await terminate_the_waiting_backend(theirs, holder)
            with pytest.raises(OutcomeUnknown):
                await asyncio.wait_for(fire, 10)
        assert outcomes(await ours.apply([Fire(made.id, "impression", "wrapper", PLAY + 1)])) == ["counted"]

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    assert postgres_ledger.rows()[made.id]["impression_at"] == PLAY + 1, "the ended statement wrote nothing"


def test_a_batch_whose_connection_dies_before_its_commit_is_unavailable_and_not_unknown(
    postgres_ledger: LedgerDatabase,
) -> None:
    """A release reads and locks its row first: its session ending there left nothing committed, so it is
    a plain outage, whose operations may be applied again."""
    made = record()

    async def scenario(ours: PostgresLedgerStore, theirs: PostgresLedgerStore, _: list[str]) -> None:
        await ours.apply([Issue(made)])
        async with row_held(theirs, made.id) as holder:
            release = asyncio.ensure_future(ours.apply([Release(made.id, made.account_id, PLAY - 10)]))
            await terminate_the_waiting_backend(theirs, holder)
            with pytest.raises(Exception) as failed:
                await asyncio.wait_for(release, 10)
        assert unavailable(failed.value) and not isinstance(failed.value, OutcomeUnknown), failed.value
        assert outcomes(await ours.apply([Release(made.id, made.account_id, PLAY - 9)])) == ["released"]

    postgres_ledger.clear()
    two_nodes(postgres_ledger, scenario)
    assert postgres_ledger.rows()[made.id]["settle_reason"] == "released"
