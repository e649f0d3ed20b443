"""The ledger on PostgreSQL through asyncpg: a small pool, one transaction and a few statements per batch, or
one statement for a batch on ad requests its writer remembers.

Whatever the batch size, a batch costs at most: one locking read of the ad requests its fires and releases
name (in id order, fired bits included), one locking read of expired ones to settle (SKIP LOCKED: it never
waits, so it cannot deadlock, and two workers' sweeps take disjoint rows), one statement that creates the
missing counter rows and locks and reads every counter (in key order), then ONE statement that writes every
table (each write a data-modifying WITH of it; the tables and rows are disjoint, so their order within it
does not matter) and stores the frames' answers, and the expiry sweep's pruning. Each statement is a round
trip to the database and back, which on a network costs more than the statement: a batch of ad requests
that reserve nothing takes three (BEGIN, the writes, COMMIT; five before the writes were one statement), a
batch of pixels four (and the locking read), and either one more when it reserves or moves reservations
(the counters). Locks are always taken ad requests first, then counters, then request_stats, then
key_stats, each in a fixed order, so concurrent workers wait for each other but never deadlock; the rules run
in between, in the shared Batch.

Like SQLite's, the writer remembers the state of the ad requests it wrote (remembered.py), but here another
node may change any of them at any time, so the memory is never trusted, only checked: a batch whose fires
all name remembered, unsettled ad requests, with no release, sweep or reservation (recall()), is resolved on
the memory and sent as ONE statement outside an explicit transaction (PostgreSQL commits it durably before
it answers), whose UPDATE changes each row only where the fired bits of the events it counts there are
still the remembered ones and which fails as a whole, through migration 0008's ledger_written(), when a row
was left out; the writer then forgets those ad requests and applies the batch again as above. A batch of
pixels or of uncapped ad requests is then one round trip instead of four or three, and no row lock is
written before its update. Fires on ad requests the writer does not remember (issued by another worker or
node, or older than the memory) take one plain read of their states first, no lock and no transaction, and
then go as that same checked statement: two round trips instead of four, and the check holds each row to
what was read exactly as it holds it to what was remembered.

Several batches are in flight at once (the worker's group commit, or the writer process's lanes), and a
player's quartiles, fired a moment apart, often land in two of them. Each checks only the bits of its own
events, so the two commit in either order (the row lock orders them in the database) and each is remembered
onto what the other left (Remembered.commit's merge). A batch that names the same event of an ad request as
a batch ahead of it (a retry, the other VAST layer's fire) waits for that one to finish before it is
resolved (_Ordered): resolved on the memory from before, its check would fail once the first committed and
it would go again, read and locked. Until the check was narrowed to a batch's own events, every batch on an
ad request waited so, and a tracking run's batches mostly went one at a time.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import cache

import asyncpg

from adslot.ledger.claims import closes_at
from adslot.ledger.ivt import Judge
from adslot.ledger.records import (
    ANSWER_SLOTS,
    COLUMNS,
    EVENT_COLUMNS,
    FIRE_BITS,
    ISSUE_COLUMNS,
    WIN_COLUMNS,
    AdRequest,
    AlreadyAnswered,
    Operation,
    Receipt,
    Verdict,
)
from adslot.ledger.remembered import Remembered, issued
from adslot.ledger.resolve import Current, RowChange
from adslot.ledger.screens_of import ScreensOf, Where
from adslot.ledger.store import (
    ANSWER,
    ANSWER_COLUMNS,
    COUNTER_COLUMNS,
    COUNTER_SET,
    DUE_WHERE,
    FIRED_SET,
    INSERT_COLUMNS,
    INSERT_WIN_COLUMNS,
    INVALID_COLUMNS,
    KEY_STATS_UPSERT_SET,
    PLAYED_SELECT,
    PRUNE_ANSWERS,
    PRUNE_WHERE,
    SAVE_ANSWER_SET,
    SCREEN_PLAYS_SELECT,
    SCREEN_PLAYS_UPSERT,
    SCREEN_STATUS_COLUMNS,
    SCREEN_STATUS_SELECT,
    SCREEN_STATUS_UPSERT_SET,
    SELECT_ONE,
    STATE_COLUMNS,
    STATS_UPSERT_SET,
    TIME_COLUMNS,
    Batch,
    answer_of,
    answer_rows,
    coalesce_set,
    current_of,
    issue_values,
    set_items,
)
from adslot.storage.failures import OutcomeUnknown, connection_lost
from adslot.storage.kept_connections import KeptConnections

SELECT = SELECT_ONE + "$1"
SELECT_MANY = SELECT_ONE.replace("WHERE id = ", "WHERE id = ANY($1::uuid[])")
_TYPES = {
    **dict.fromkeys(("account_id", "campaign_id", "creative_id", "key_id", "duration_seconds"), "int"),
    "source_network": "bigint",
    **dict.fromkeys(("venue_id", "screen_id", "claims", "settle_reason"), "text"),
    **dict.fromkeys(("play_time", "created_at", "expires_at", *TIME_COLUMNS, "settled_at"), "bigint"),
    "id": "uuid",
    "fired": "int",
    "impressions": "float8",
}
"""The array type of each ad_requests column that a batch sends through unnest()."""
INSERT = (
    f"INSERT INTO ad_requests ({INSERT_COLUMNS}) SELECT * FROM unnest("
    + ", ".join(f"${i + 1}::{_TYPES[c]}[]" for i, c in enumerate(ISSUE_COLUMNS))
    + ")"
)
"""Every admitted ad request of a batch in one statement: PostgreSQL plans and starts its executor once per
batch, not once per row (as executemany's one INSERT per row did)."""
_WIN_TYPES = {
    **dict.fromkeys(WIN_COLUMNS, "text"),
    "ad_request_id": "uuid",
    "demand_creative_id": "int",
    **dict.fromkeys(
        ("bid_price_micros", "price_micros", "min_to_win_micros", "play_time", "created_at"), "bigint"
    ),
    "multiplier": "float8",
}
INSERT_WINS = (
    f"INSERT INTO demand_wins ({INSERT_WIN_COLUMNS}) SELECT * FROM unnest("
    + ", ".join(f"${i + 1}::{_WIN_TYPES[c]}[]" for i, c in enumerate(WIN_COLUMNS))
    + ")"
)
BILLS_DUE = (
    "UPDATE demand_wins SET bill_due_at = due.at FROM unnest($1::bigint[], $2::uuid[]) AS due(at, id) "
    "WHERE demand_wins.ad_request_id = due.id AND demand_wins.bill_due_at IS NULL RETURNING 1"
)
"""store.BILL_DUE for a whole batch: the billing notices of the programmatic ad requests whose first
impression it counts fall due in its own statement."""
LOCK_STATE = (
    f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE"
)
READ_STATE = f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE id = ANY($1::uuid[])"
"""LOCK_STATE without the lock, the order or a transaction: the states of ad requests this writer does not
remember, for a batch that then goes as its one checked statement (recall())."""
LOCK_DUE = (
    f"SELECT {', '.join(STATE_COLUMNS)} FROM ad_requests WHERE "
    + DUE_WHERE.format(before="$1", limit="$2")
    + " FOR UPDATE SKIP LOCKED"
)


@cache
def update_sql(columns: tuple[str, ...], counters: bool, expected: bool = False) -> str:
    """The UPDATE of a batch's changed ad requests, narrowed to the set-once columns its changes set and,
    only when one of them has a repeated or late fire, the two counters: a batch of first impressions sends
    three arrays (impression_at, fired, id) instead of twelve, which asyncpg encodes and PostgreSQL unnests
    and COALESCEs for every row. The few combinations batches have are built (and prepared) once each.

    `expected`: a batch on remembered ad requests, which locked nothing before: each row is updated only if
    it is still unsettled and the fired bits of the events this batch counts on it (`mask`) are still the
    remembered ones (`was`), and every updated row is returned, for write_all()'s check that none was left
    out. Only those bits: they are all that the batch's verdicts on the row were decided on (counted or
    echo; a duplicate's bit, once set, is never cleared), so a fire of another event that another batch
    or node committed meanwhile fails nothing, and two batches in flight on one ad request, each counting
    its own quartile, both commit in whichever order they reach it."""
    sets = [coalesce_set(columns, "c.{c}")]
    names = list(columns)
    types = [_TYPES[c] for c in columns]
    if counters:
        sets.append(COUNTER_SET.format(dups="c.dups", late="c.late"))
        names += ["dups", "late"]
        types += ["int", "int"]
    sets.append(FIRED_SET.format(fired="c.fired"))
    names += ["fired", "id"]
    types += ["int", "uuid"]
    where = "ad_requests.id = c.id"
    if expected:
        names += ["mask", "was"]
        types += ["int", "int"]
        where += " AND (ad_requests.fired & c.mask) = c.was AND ad_requests.settle_reason IS NULL RETURNING 1"
    arrays = ", ".join(f"${i + 1}::{t}[]" for i, t in enumerate(types))
    return (
        f"UPDATE ad_requests SET {set_items(*sets)} FROM unnest({arrays}) "
        f"AS c({', '.join(names)}) WHERE {where}"
    )


def update_arrays(
    changes: Sequence[tuple[uuid.UUID, RowChange]], expected: Mapping[uuid.UUID, Current] | None = None
) -> tuple[str, list[list[object]]]:
    """update_sql() for these changes, and its parameters: one array per column, a row per ad request.

    The event columns are the one event the batch's first fires set (a batch of impressions), else all six:
    exact subsets would make up to 64 x 4 statements, past asyncpg's cache of 100 prepared statements per
    connection, and a mixed workload would then prepare statements again and again; this way there are 48
    (no event, each one, all six; with or without the settlement columns, with or without the counters; and
    the unsettled ones again, checked against `expected`, the remembered states).

    With `expected`, the rows go in id order: that statement takes their row locks itself, in the order
    every batch's locking read takes them (ORDER BY id), so two batches wait for each other, not deadlock."""
    if expected is not None:
        changes = sorted(changes, key=_by_id)
    times = {c for _, change in changes for c in change.set_times}
    columns = tuple(times) if len(times) <= 1 else TIME_COLUMNS
    arrays: list[list[object]] = [[change.set_times.get(c) for _, change in changes] for c in columns]
    if any(change.settle_reason is not None for _, change in changes):
        columns += ("settled_at", "settle_reason")
        arrays += [[c.settled_at for _, c in changes], [c.settle_reason for _, c in changes]]
    counters = any(change.duplicates or change.late for _, change in changes)
    if counters:
        arrays += [[c.duplicates for _, c in changes], [c.late for _, c in changes]]
    arrays += [[c.fired for _, c in changes], [ident for ident, _ in changes]]
    if expected is not None:
        masks = [event_bits(change.fired) for _, change in changes]
        arrays.append([mask for mask in masks])  # a list[object], as arrays holds
        arrays.append([expected[ident].fired & mask for (ident, _), mask in zip(changes, masks, strict=True)])
    return update_sql(columns, counters, expected is not None), arrays


_FIRST_LAYER = sum(FIRE_BITS[event, "wrapper"] for event in EVENT_COLUMNS)
"""Each event's wrapper-layer bit in `fired`; records.FIRE_BITS puts its inline bit just above it."""


def event_bits(fired: int) -> int:
    """Both layers' bits of every event that has a bit in `fired`: what a first fire's verdict (counted
    or echo) depends on."""
    events = (fired | fired >> 1) & _FIRST_LAYER
    return events | events << 1


def _by_id(item: tuple[uuid.UUID, RowChange]) -> int:
    return item[0].int


CLAIM_COUNTERS = (
    "INSERT INTO delivery_counters (key, closes_at) "
    "SELECT k, c FROM unnest($1::text[], $2::bigint[]) AS t(k, c) ORDER BY k "
    "ON CONFLICT (key) DO UPDATE SET reserved = delivery_counters.reserved "
    f"RETURNING {', '.join(COUNTER_COLUMNS)}"
)
"""Every key's row, created where missing, locked, and read, in one round trip and in key order (the order
every batch takes them in, so concurrent batches wait but never deadlock).

The no-op DO UPDATE is what locks an existing row and makes RETURNING give it back; in READ COMMITTED it
waits for a transaction holding the row and then reads the row as that one committed it, and if that one
deleted it (the expiry sweep's prune), it inserts the row afresh. It replaces an INSERT ... DO NOTHING and a
SELECT ... FOR UPDATE: a capped batch's round trips 5 -> 4, at the cost of one more row version per counter
and batch (a HOT update: no indexed column changes)."""
WRITE_COUNTERS = (
    "UPDATE delivery_counters SET cap = c.cap, reserved = c.reserved, delivered = c.delivered, "
    "last_at = c.last_at FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) "
    "AS c(key, cap, reserved, delivered, last_at) WHERE delivery_counters.key = c.key"
)
PRUNE = (
    "DELETE FROM delivery_counters WHERE key IN (SELECT key FROM delivery_counters WHERE "
    + PRUNE_WHERE.format(before="$1", limit="$2")
    + " FOR UPDATE SKIP LOCKED)"
)
"""SKIP LOCKED: a counter another worker's batch holds is left for a later sweep, so this never waits on a
lock it could deadlock with (batches lock counters in key order; the prune takes them in closes_at order)."""
STATS = (
    "INSERT INTO request_stats (venue_id, screen_id, hour, requests, fills) "
    "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[]) "
    "ON CONFLICT (venue_id, screen_id, hour) DO UPDATE SET " + STATS_UPSERT_SET
)
KEY_STATS = (
    "INSERT INTO key_stats (key_id, hour, requests, fills) "
    "SELECT * FROM unnest($1::int[], $2::bigint[], $3::bigint[], $4::bigint[]) "
    "ON CONFLICT (hour, key_id) DO UPDATE SET " + KEY_STATS_UPSERT_SET
)

SCREENS = (
    f"INSERT INTO screen_status ({SCREEN_STATUS_COLUMNS}) "
    + SCREEN_STATUS_SELECT.format(
        now="$10::bigint",
        union=(
            "SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], "
            "$6::bigint[], $7::bigint[]) AS r(venue_id, screen_id, last_request_at, last_fill_at, "
            "last_play_at, fills, plays) UNION ALL "
            + PLAYED_SELECT.format(played="unnest($8::uuid[], $9::bigint[]) AS p(id, at)")
        ),
    )
    + f" ON CONFLICT (venue_id, screen_id) DO UPDATE SET {SCREEN_STATUS_UPSERT_SET}"
)
"""What the batch tells of each screen (Batch.screen_rows): its requests and the plays whose screens this
worker knows (it issued their ad requests, screens_of.py), folded into one row per screen; and the other
plays, located through their ad requests by primary key in the same statement (no round trip more)."""
SCREEN_PLAYS = (
    "INSERT INTO screen_plays (venue_id, screen_id, hour, plays) "
    + SCREEN_PLAYS_SELECT.format(
        known="SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])",
        played="unnest($5::uuid[], $6::bigint[]) AS p(id, at)",
    )
    + f" {SCREEN_PLAYS_UPSERT}"
)

SAVE_ANSWERS = (
    f"INSERT INTO ledger_answers ({ANSWER_COLUMNS}) "
    "SELECT * FROM unnest($1::bytea[], $2::int[], $3::bigint[], $4::bigint[], $5::bytea[]) "
    f"{SAVE_ANSWER_SET} RETURNING seq"
)
"""Waits on a row a concurrent transaction is writing (a dying writer's commit of the same frame), then
writes nothing if that one committed."""
INSERT_INVALID = (
    f"INSERT INTO invalid_fires ({INVALID_COLUMNS}) "
    "SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::bigint[], $5::text[]) "
    "ON CONFLICT DO NOTHING"
)
"""The fires the invalid-traffic rules flagged (rare): kept with their reason."""
WRITES = {
    "counters": WRITE_COUNTERS,
    "invalid": INSERT_INVALID,
    "insert": INSERT,
    "stats": STATS,
    "key_stats": KEY_STATS,
    "screens": SCREENS,
    "plays": SCREEN_PLAYS,
    "answers": SAVE_ANSWERS,
    "wins": INSERT_WINS,
    "bills": BILLS_DUE,
}
"""The writes of step 4 but the UPDATE (update_sql(), narrowed per batch) and the answers of step 6, by
name, as parts of write_all()'s one statement."""
_PARAMETER = re.compile(r"\$(\d+)")


def _shifted(sql: str, offset: int) -> str:
    """`sql` with its parameters $1..$n numbered from $offset+1."""
    return _PARAMETER.sub(lambda m: f"${int(m[1]) + offset}", sql)


@cache
def write_all(parts: tuple[tuple[str, str], ...], checked: bool = False) -> str:
    """One statement doing the writes in `parts` ((name, SQL) each: a WRITES item or the batch's UPDATE),
    each as a data-modifying WITH query, their parameters numbered one after the other; it returns how many
    answers it stored (0 without "answers"). PostgreSQL runs every such query exactly once, to completion, on
    one snapshot: none sees another's rows, which none needs (they write different tables; the UPDATE's rows
    were locked and read before, the INSERT's are new).

    `checked`: two more parameters, the rows the UPDATE must have updated and the answers it must have
    stored, which migration 0008's ledger_written() compares with what they did, failing the statement (and
    so rolling all of it back) on any difference: the statement of a batch that locked nothing before."""
    queries = []
    offset = 0
    names = {name for name, _ in parts}
    for name, sql in parts:
        queries.append(f"written_{name} AS ({_shifted(sql, offset)})")
        offset += len(set(_PARAMETER.findall(sql)))

    def count(name: str) -> str:
        return f"(SELECT count(*) FROM written_{name})" if name in names else "0"

    result = count("answers")
    if checked:
        result = f"ledger_written({count('update')}, ${offset + 1}, {result}, ${offset + 2})"
    return f"WITH {', '.join(queries)} SELECT {result}"


ANSWERED = "AL001"
STALE = "AL002"
"""The SQLSTATEs ledger_written() (migration 0008) fails a checked statement with."""
READ_ANSWER = ANSWER.format(client="$1", slot="$2")
PRUNE_OLD_ANSWERS = PRUNE_ANSWERS.format(before="$1")


def _columns(rows: Sequence[Sequence[object]], width: int) -> list[list[object]]:
    """Rows as one list per column, for unnest()."""
    return [list(col) for col in zip(*rows, strict=True)] if rows else [[] for _ in range(width)]


async def _read_current(conn: asyncpg.Connection, batch: Batch) -> list[uuid.UUID]:
    """Lock the named ad requests, then the expired ones to settle (added to the state): their ids."""
    ids = batch.named_ids()
    if ids:
        for row in await conn.fetch(LOCK_STATE, ids):
            batch.current[row[0]] = current_of(tuple(row)[1:])
    due = batch.due()
    if due is None:
        return []
    found = []
    for row in await conn.fetch(LOCK_DUE, *due):
        found.append(row[0])
        batch.current.setdefault(row[0], current_of(tuple(row)[1:]))
    return found


def _writes(
    batch: Batch,
    receipts: Sequence[Receipt],
    verdicts: Sequence[Verdict],
    expected: bool,
    screens: Mapping[int, Where],
) -> tuple[tuple[tuple[str, str], ...], list[object], list[tuple[bytes, int, int, int, bytes]]]:
    """write_all()'s parts for this batch, their parameters, and the answer rows among them; `expected`: the
    UPDATE checks each row against the remembered state the batch was resolved on (batch.current);
    `screens`: the (venue, screen) of the ad requests this worker issued (screens_of.py)."""
    parts: list[tuple[str, str]] = []
    args: list[object] = []
    writes = batch.counter_writes()
    if writes:
        parts.append(("counters", WRITE_COUNTERS))
        args += _columns(writes, 5)
    if batch.admitted:
        parts.append(("insert", INSERT))
        args += _columns([issue_values(r, c) for r, c in batch.admitted], len(ISSUE_COLUMNS))
    changes = batch.row_changes()
    if changes:
        update, arrays = update_arrays(changes, batch.current if expected else None)
        parts.append(("update", update))
        args += arrays
    if batch.wins:
        parts.append(("wins", INSERT_WINS))
        args += _columns(batch.win_rows(), len(WIN_COLUMNS))
    invalid = batch.invalid_rows()
    if invalid:
        parts.append(("invalid", INSERT_INVALID))
        args += _columns(invalid, 5)
    bills = batch.bills_due()
    if bills:
        parts.append(("bills", BILLS_DUE))
        args += _columns(bills, 2)
    stats = batch.stats()
    if stats:
        parts.append(("stats", STATS))
        args += _columns(stats, 5)
    key_stats = batch.key_stats()
    if key_stats:
        parts.append(("key_stats", KEY_STATS))
        args += _columns(key_stats, 4)
    now = int(time.time())
    status, plays, unknown = batch.screen_rows(now, screens)
    if status or unknown:
        parts.append(("screens", SCREENS))
        columns = _columns(status, 9)
        args += [*columns[:2], *columns[3:6], *columns[7:9], *_columns(unknown, 2), now]
        if plays or unknown:
            parts.append(("plays", SCREEN_PLAYS))
            args += [*_columns(plays, 4), *_columns(unknown, 2)]
    rows = answer_rows(receipts, verdicts)
    if rows:
        parts.append(("answers", SAVE_ANSWERS))
        args += _columns(rows, 5)
    return tuple(parts), args, rows


async def _apply(
    conn: asyncpg.Connection, batch: Batch, receipts: Sequence[Receipt], screens: Mapping[int, Where]
) -> tuple[list[Verdict], list[bytes]]:
    """The batch plan's I/O, inside the caller's transaction: its verdicts, and each receipt's answer. Every
    state it resolves on (fired bits included) is read and locked here: another node may change an ad request
    at any time."""
    batch.resolve(await _read_current(conn, batch))
    keys = batch.counter_keys()
    if keys:
        # A row made here for an issue that is refused stays, empty and harmless.
        rows = await conn.fetch(CLAIM_COUNTERS, keys, [closes_at(key) for key in keys])
        batch.load([tuple(r) for r in rows])
    batch.admit()
    verdicts = batch.verdicts()
    parts, args, answers = _writes(batch, receipts, verdicts, False, screens)
    # Step 6 with step 4: a frame answered before stores nothing, and fails the batch (the caller's
    # transaction rolls every write back).
    if parts and await conn.fetchval(write_all(parts), *args) != len(answers):
        raise AlreadyAnswered("a resent ledger frame was committed before")
    prune = batch.prune()
    if prune is not None:
        await conn.execute(PRUNE, *prune)
        await conn.execute(PRUNE_OLD_ANSWERS, batch.answers_before())
    return verdicts, [row[-1] for row in answers]


class StaleMemory(Exception):
    """An ad request a batch was resolved on from the writer's memory is no longer as remembered."""


def recall(batch: Batch, memory: Remembered, ids: Sequence[uuid.UUID]) -> list[uuid.UUID] | None:
    """Whether `batch` can go as one statement that locks nothing beforehand, resolved on known states
    (which it then holds in batch.current): fires, issues that reserve nothing, no-fills. None when it
    cannot: releases and the expiry sweep settle, and reservations lock counters, so those batches read
    and lock their rows first, as do fires on an ad request remembered settled. Else the ids whose state
    this writer does not remember (a pixel reaching another worker than the one that issued its ad
    request, or one older than the memory), for _read_unlocked() to read first. `ids`: the batch's
    named_ids()."""
    if batch.releases or batch.settles or any(issue.claims for issue in batch.issues):
        return None
    found, missing = memory.states(ids)
    if any(state.settle_reason is not None for state in found.values()):
        return None
    batch.current.update(found)
    return missing


async def _read_unlocked(conn: asyncpg.Connection, batch: Batch, ids: list[uuid.UUID]) -> bool:
    """The states of `ids` into batch.current, read with no lock and outside a transaction: one round trip
    where BEGIN, a locking read and COMMIT around the writes take three more. What it reads is only a guess,
    as the memory is, and the checked statement holds every row to it. False if one is settled (that batch
    is read and locked instead); an id with no row is an unknown ad request, as in a locking read."""
    for row in await conn.fetch(READ_STATE, ids):
        state = current_of(tuple(row)[1:])
        if state.settle_reason is not None:
            return False
        batch.current[row[0]] = state
    return True


async def _apply_recalled(
    conn: asyncpg.Connection, batch: Batch, receipts: Sequence[Receipt], screens: Mapping[int, Where]
) -> tuple[list[Verdict], list[bytes]]:
    """A batch that recall() took, as ONE statement on its own (autocommit: PostgreSQL commits it, durably,
    before it answers), instead of BEGIN, a locking read, the writes and COMMIT: a quarter of the round
    trips, and no row lock written before each row's update. Every row is updated only if it still is as
    remembered, and the statement fails, writing nothing, if one is not (StaleMemory) or a resent frame was
    committed before (AlreadyAnswered)."""
    batch.resolve(())
    batch.admit()
    verdicts = batch.verdicts()
    parts, args, answers = _writes(batch, receipts, verdicts, True, screens)
    if parts:
        try:
            await conn.fetchval(write_all(parts, checked=True), *args, len(batch.row_changes()), len(answers))
        except asyncpg.DeadlockDetectedError as exc:
            raise StaleMemory("a concurrent batch took the same rows in another order") from exc
        except Exception as exc:
            sqlstate = getattr(exc, "sqlstate", None)
            if sqlstate == STALE:
                raise StaleMemory(str(exc)) from exc
            if sqlstate == ANSWERED:
                raise AlreadyAnswered("a resent ledger frame was committed before") from exc
            _unknown_if_lost(exc)
            raise
    return verdicts, [row[-1] for row in answers]


def _unknown_if_lost(exc: Exception) -> None:
    """For a write that failed while it may have been committing: raise OutcomeUnknown when its connection
    went away (the server may have committed it), so that the group committer never applies its operations
    again (an ad request inserted twice, a fire answered as its own duplicate)."""
    if connection_lost(exc):
        raise OutcomeUnknown(f"the connection went away during a write: {type(exc).__name__}: {exc}") from exc


def admitted(batch: Batch) -> list[tuple[uuid.UUID, Current]]:
    return [(record.id, issued(record, claims)) for record, claims in batch.admitted]


_EVENT_INDEX = {event: n for n, event in enumerate(EVENT_COLUMNS)}


def order_keys(batch: Batch) -> set[int]:
    """What `batch` waits for in _Ordered: each (ad request, event) its fires name, and every event of an ad
    request it releases (a release settles the row, which every fire's check reads)."""
    index = _EVENT_INDEX
    keys = {fire.ad_request_id.int << 3 | index[fire.event] for fire in batch.fires}
    for release in batch.releases:
        base = release.ad_request_id.int << 3
        keys.update(base | n for n in index.values())
    return keys


class _Ordered:
    """Each (ad request, event)'s latest batch in flight (order_keys()), for a batch naming it to wait for
    (see the module's docstring). A batch takes its place before it waits, so three batches on one key go
    one after the other, and it waits only for batches taken before it: no cycle, no deadlock."""

    def __init__(self) -> None:
        self._latest: dict[int, asyncio.Future[None]] = {}

    @asynccontextmanager
    async def turn(self, keys: Iterable[int]) -> AsyncIterator[None]:
        latest = self._latest
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        ahead = set()
        for key in keys:
            before = latest.get(key)
            if before is not None:
                ahead.add(before)
            latest[key] = mine
        try:
            if ahead:
                await asyncio.wait(ahead)
            yield
        finally:
            mine.set_result(None)
            for key in keys:
                if latest.get(key) is mine:
                    del latest[key]


class _Connection(asyncpg.Connection):  # type: ignore[misc]
    """Skips asyncpg's reset query on every release back to the pool.

    The ledger holds no advisory locks, LISTENs, cursors or session settings beyond search_path, and every
    transaction ends before release, so the reset would only add a round trip to each point read.
    """

    def get_reset_query(self) -> str:
        return ""


class PostgresLedgerStore:
    def __init__(
        self, dsn: str, schema: str | None, pool_size: int = 8, *, judge: Judge | None = None
    ) -> None:
        """`judge`: the invalid-traffic rules fires are judged by (None: none)."""
        self._judge = judge
        self._dsn = dsn
        self._schema = schema
        self._pool_size = pool_size
        self._connections: KeptConnections | None = None
        self._memory = Remembered()
        self._screens_of = ScreensOf()
        self._ordered = _Ordered()

    async def start(self) -> None:
        settings = {"search_path": self._schema} if self._schema else {}
        pool = await asyncpg.create_pool(
            self._dsn,
            min_size=2,
            max_size=self._pool_size,
            server_settings=settings,
            connection_class=_Connection,
        )
        self._connections = KeptConnections(pool)

    async def close(self) -> None:
        if self._connections is not None:
            await self._connections.close()
            self._connections = None

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None:
        assert self._connections is not None, "store not started"
        async with self._connections.lease() as conn:
            row = await conn.fetchrow(SELECT, ad_request_id)
        return AdRequest(**dict(zip(COLUMNS, row, strict=True))) if row else None

    async def get_many(self, ids: Sequence[uuid.UUID]) -> list[AdRequest | None]:
        assert self._connections is not None, "store not started"
        async with self._connections.lease() as conn:
            rows = await conn.fetch(SELECT_MANY, list(ids))
        found = {row[0]: AdRequest(**dict(zip(COLUMNS, row, strict=True))) for row in rows}
        return [found.get(ident) for ident in ids]

    async def answer(self, client: bytes, seq: int) -> bytes | None:
        assert self._connections is not None, "store not started"
        async with self._connections.lease() as conn:
            row = await conn.fetchrow(READ_ANSWER, client, seq % ANSWER_SLOTS)
        return answer_of(row, seq)

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]:
        return (await self._write(operations, ()))[0]

    async def apply_frames(self, operations: Sequence[Operation], receipts: Sequence[Receipt]) -> list[bytes]:
        return (await self._write(operations, receipts))[1]

    async def _write(
        self, operations: Sequence[Operation], receipts: Sequence[Receipt]
    ) -> tuple[list[Verdict], list[bytes]]:
        """A batch of fires and plain issues as one unlocked statement, checked row by row, after one
        unlocked read of the ad requests it does not remember; any other, or one whose rows changed behind
        what it remembered or read, read and locked in a transaction. Either waits for the
        batches in flight on the same ad requests first. Only committed states are remembered; a failed
        batch leaves the memory as it was (it is checked before it is trusted)."""
        connections, memory, screens_of = self._connections, self._memory, self._screens_of
        assert connections is not None, "store not started"
        judge = self._judge
        batch = Batch.of(operations, judge)
        ids = batch.named_ids()
        async with self._ordered.turn(order_keys(batch)):
            missing = recall(batch, memory, ids)
            if missing is not None:
                recalled = None
                try:
                    async with connections.lease() as conn:
                        if not missing or await _read_unlocked(conn, batch, missing):
                            recalled = await _apply_recalled(conn, batch, receipts, screens_of.by_id)
                except StaleMemory:
                    memory.drop(ids)
                if recalled is not None:
                    memory.commit(batch.current, batch.changes, admitted(batch), merge=True)
                    screens_of.add(record for record, _ in batch.admitted)
                    return recalled
                batch = Batch.of(operations, judge)
            committing = False
            try:
                async with connections.lease() as conn, conn.transaction():
                    result = await _apply(conn, batch, receipts, screens_of.by_id)
                    committing = True  # what fails from here on is the COMMIT
            except Exception as exc:
                if committing:
                    _unknown_if_lost(exc)
                raise
            memory.commit(batch.current, batch.changes, admitted(batch))
            screens_of.add(record for record, _ in batch.admitted)
            return result
