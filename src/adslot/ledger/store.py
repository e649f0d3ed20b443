"""The narrow interface between the ledger and a database, the SQL both dialects share, and the batch plan.

A store applies a batch of operations in ONE transaction, under a write lock on the rows it touches, and
returns one Verdict per operation; the group committer decides what goes in a batch. Dedupe rests on the
ad request's `fired` bits (one per event and VAST layer), read and set under the write lock that the batch
holds on the row (SQLite's database write lock; PostgreSQL's FOR UPDATE), never on a read followed by an
unlocked write, so simultaneous duplicate pixels count once, across workers too. A first fire is one UPDATE
of the row it counts on: no second table, no second index. The rules themselves live in resolve.py
(Proof of Play, releases, expiry) and budget.py (reservations).

Both stores run the same plan (Batch), doing only the I/O between its steps, in this order, which is also
the order in which PostgreSQL takes its row locks, each kind in key order (so workers cannot deadlock):
1. lock the ad requests that fires and releases name (by id); pick the expired ones to settle;
2. resolve fires (against the fired bits just read), then releases, then the expiry settle;
3. load the counters that issues claim and that settled ad requests move (insert missing rows, lock by key);
4. deliver and release, then admit each issue in turn; write counters, new ad requests, row changes,
   request_stats and key_stats (one statement or executemany each, one row per key: counts are aggregated per
   batch);
5. with a Settle, drop the counters whose window closed before its retention (the closes_at index);
6. store the answer of each worker frame the batch carries (ledger_answers), so that a frame resent after
   its writer process died is answered, not applied twice.
Every read and write is keyed (primary key, the unsettled-expiry or the closes_at index): no scans, but for
the Settle's pruning of ledger_answers, a table of ANSWER_SLOTS rows per worker process started in a day.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from adslot.ledger.budget import Counter, Snapshot, admit, claim_keys, deliver, release
from adslot.ledger.claims import claims_json, parse_claims
from adslot.ledger.ivt import Judge
from adslot.ledger.records import (
    ANSWER_RETENTION_SECONDS,
    ANSWER_SLOTS,
    COLUMNS,
    EVENT_COLUMNS,
    ISSUE_COLUMNS,
    WIN_COLUMNS,
    AdRequest,
    Fire,
    Issue,
    NoFill,
    Operation,
    Receipt,
    Release,
    Settle,
    Verdict,
    Win,
)
from adslot.ledger.resolve import (
    NO_TIMES,
    Current,
    RowChange,
    counter_moves,
    resolve,
    resolve_releases,
    resolve_settles,
)
from adslot.ledger.wire import encode_verdicts

TIME_COLUMNS = tuple(EVENT_COLUMNS.values())
STATE_COLUMNS = (
    "id",
    "expires_at",
    *TIME_COLUMNS,
    "account_id",
    "claims",
    "settle_reason",
    "fired",
    "source_network",
    "duration_seconds",
    "campaign_id",
)
COUNTER_COLUMNS = ("key", "cap", "reserved", "delivered", "last_at")
IMPRESSION_COLUMN = EVENT_COLUMNS["impression"]
_WIN_FIELDS = operator.attrgetter(*WIN_COLUMNS)
INSERT_WIN_COLUMNS = ", ".join(WIN_COLUMNS)
BILL_DUE = "UPDATE demand_wins SET bill_due_at = {at} WHERE ad_request_id = {id} AND bill_due_at IS NULL"
"""Set once: a later counted impression (a resent frame) never moves it, nor makes it due twice."""
HOUR = 3600


class LedgerStore(Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def get(self, ad_request_id: uuid.UUID) -> AdRequest | None: ...

    async def get_many(self, ids: Sequence[uuid.UUID]) -> list[AdRequest | None]:
        """Each id's ad request or None, in order: one round trip for many concurrent readers."""
        ...

    async def apply(self, operations: Sequence[Operation]) -> list[Verdict]: ...


class DatabaseLedgerStore(LedgerStore, Protocol):
    """A store on the database itself, as the writer process runs it: it also keeps each frame's answer."""

    async def apply_frames(self, operations: Sequence[Operation], receipts: Sequence[Receipt]) -> list[bytes]:
        """apply(), which also stores each receipt's answer frame in the same transaction and returns them;
        AlreadyAnswered (and nothing written) when one of them was stored before."""
        ...

    async def answer(self, client: bytes, seq: int) -> bytes | None:
        """The answer stored for frame `seq` of worker `client`, or None if no batch carrying it committed."""
        ...


def answer_rows(
    receipts: Sequence[Receipt], verdicts: Sequence[Verdict]
) -> list[tuple[bytes, int, int, int, bytes]]:
    """(client, slot, seq, at, answer) of each receipt: the frame its worker would have received."""
    return [
        (r.client, r.seq % ANSWER_SLOTS, r.seq, r.at, encode_verdicts(verdicts[r.start : r.stop]))
        for r in receipts
    ]


def answer_of(row: Sequence[Any] | None, seq: int) -> bytes | None:
    """The answer in an ANSWER row if it is frame `seq`'s; the slot may hold an earlier frame's, or none."""
    return bytes(row[1]) if row is not None and row[0] == seq else None


_ACCOUNT = 1 + len(TIME_COLUMNS)
"""Where account_id sits in a STATE_COLUMNS row without its id: expires_at, the event times, then it."""


def current_of(row: Sequence[object]) -> Current:
    """A STATE_COLUMNS row (without its id) as the resolver's view of it; every unfired one shares
    NO_TIMES, so the writer's memory of them holds one tuple, not one each."""
    times = tuple(row[1:_ACCOUNT])
    return Current(
        int(row[0]),  # type: ignore[call-overload]
        NO_TIMES if times == NO_TIMES else times,  # type: ignore[arg-type]
        int(row[_ACCOUNT]),  # type: ignore[call-overload]
        row[_ACCOUNT + 1],  # type: ignore[arg-type]
        row[_ACCOUNT + 2],  # type: ignore[arg-type]
        int(row[_ACCOUNT + 3]),  # type: ignore[call-overload]
        *_judged_by(row[_ACCOUNT + 4 :]),
    )


def _judged_by(rest: Sequence[object]) -> tuple[int, int | None, bool]:
    """(network, duration, programmatic) from a row's last three state columns; (0, None, False) from a row
    without them."""
    if not rest:
        return 0, None, False
    return int(rest[0] or 0), rest[1], rest[2] is None  # type: ignore[call-overload, return-value]


def change_values(change: RowChange, *, settlement: bool = True) -> tuple[object, ...]:
    """(time per event column or None, [settled_at, settle_reason,] duplicates, late fires, fired bits):
    UPDATE order."""
    times = change.set_times
    if settlement:
        return (
            *[times.get(c) for c in TIME_COLUMNS],
            change.settled_at,
            change.settle_reason,
            change.duplicates,
            change.late,
            change.fired,
        )
    return (*[times.get(c) for c in TIME_COLUMNS], change.duplicates, change.late, change.fired)


_ISSUE_FIELDS = operator.attrgetter(*(c for c in ISSUE_COLUMNS if c != "claims"))
assert ISSUE_COLUMNS[-1] == "claims", "issue_values appends the claims column last"


def issue_values(record: AdRequest, claims: str | None) -> tuple[object, ...]:
    """The INSERT row of an admitted ad request, with the claims column as admitted (one C-level getter:
    this runs for every ad request)."""
    return (*_ISSUE_FIELDS(record), claims)


SET_ONCE_COLUMNS = (*TIME_COLUMNS, "settled_at", "settle_reason")
"""The columns an UPDATE sets only where still NULL, in change_values order (the two counters follow)."""
SELECT_ONE = f"SELECT {', '.join(COLUMNS)} FROM ad_requests WHERE id = "
INSERT_COLUMNS = ", ".join(ISSUE_COLUMNS)


def coalesce_set(columns: Sequence[str], value: str) -> str:
    """SET items giving each column a value only where it is still NULL (set once, never overwritten);
    `value` is formatted with the column's name as `c`: "?" or "c.{c}". Empty for no columns."""
    return ", ".join(f"{c} = COALESCE(ad_requests.{c}, {value.format(c=c)})" for c in columns)


def set_items(*items: str) -> str:
    """A SET list of these items, leaving out the empty ones (coalesce_set() of no columns)."""
    return ", ".join(item for item in items if item)


COUNTER_SET = (
    "duplicate_count = ad_requests.duplicate_count + {dups}, late_count = ad_requests.late_count + {late}"
)
FIRED_SET = "fired = ad_requests.fired | {fired}"
"""Adds the bits of the batch's first fires; a bit once set is never cleared."""
DUE_WHERE = "settled_at IS NULL AND expires_at < {before} ORDER BY expires_at LIMIT {limit}"
"""Expired, unsettled ad requests, oldest first: exactly the partial index ix_ad_requests_unsettled_expiry."""
PRUNE_WHERE = "closes_at < {before} AND reserved = 0 ORDER BY closes_at LIMIT {limit}"
"""Closed counters past their retention that hold nothing, oldest first: a range of the closes_at index. A
counter still holding a reservation is kept until the sweep settles the ad request that holds it."""
ANSWER_COLUMNS = "client, slot, seq, at, answer"
SAVE_ANSWER_SET = (
    "ON CONFLICT (client, slot) DO UPDATE SET seq = excluded.seq, at = excluded.at, answer = excluded.answer "
    "WHERE ledger_answers.seq < excluded.seq"
)
"""Writes nothing for a frame already answered (a resend of a committed one): the store checks the count."""
ANSWER = "SELECT seq, answer FROM ledger_answers WHERE client = {client} AND slot = {slot}"
PRUNE_ANSWERS = "DELETE FROM ledger_answers WHERE at < {before}"
INVALID_COLUMNS = "ad_request_id, event, layer, played_at, reason"
"""invalid_fires' columns, in Batch.invalid_rows() order; its rows are inserted ON CONFLICT DO NOTHING."""
STATS_UPSERT_SET = (
    "requests = request_stats.requests + excluded.requests, fills = request_stats.fills + excluded.fills"
)
KEY_STATS_UPSERT_SET = (
    "requests = key_stats.requests + excluded.requests, fills = key_stats.fills + excluded.fills"
)


def _latest(column: str) -> str:
    """The later of the stored and the new time, either of which may be NULL (portable: no GREATEST)."""
    new, old = f"excluded.{column}", f"screen_status.{column}"
    keep = f"{new} IS NULL OR ({old} IS NOT NULL AND {old} >= {new})"
    return f"{column} = CASE WHEN {keep} THEN {old} ELSE {new} END"


SCREEN_STATUS_COLUMNS = (
    "venue_id, screen_id, first_seen_at, last_request_at, last_fill_at, last_play_at, window_start, "
    "window_fills, window_plays"
)
SCREEN_STATUS_UPSERT_SET = ", ".join(
    [
        *(_latest(c) for c in ("last_request_at", "last_fill_at", "last_play_at")),
        "window_fills = screen_status.window_fills + excluded.window_fills",
        "window_plays = screen_status.window_plays + excluded.window_plays",
    ]
)
"""A batch's news of a screen folded into its row: the latest times, the window's fills and plays added."""
SCREEN_STATUS_SELECT = (
    "SELECT venue_id, screen_id, {now}, max(last_request_at), max(last_fill_at), max(last_play_at), {now}, "
    "sum(fills), sum(plays) FROM ({union}) AS u WHERE true GROUP BY venue_id, screen_id ORDER BY venue_id, "
    "screen_id"
)
"""One row per screen from the batch's requests and its counted plays (located through their ad requests by
primary key, in the same statement); `WHERE true` lets SQLite parse the ON CONFLICT after a SELECT."""
PLAYED_SELECT = (
    "SELECT a.venue_id AS venue_id, COALESCE(a.screen_id, '') AS screen_id, "
    "CAST(NULL AS BIGINT) AS last_request_at, CAST(NULL AS BIGINT) AS last_fill_at, p.at AS last_play_at, "
    "0 AS fills, 1 AS plays FROM {played} JOIN ad_requests AS a ON a.id = p.id"
)
SCREEN_PLAYS_SELECT = (
    "SELECT venue_id, screen_id, hour, sum(plays) FROM ({known} UNION ALL SELECT a.venue_id, "
    "COALESCE(a.screen_id, ''), p.at - p.at % 3600, 1 FROM {played} JOIN ad_requests AS a ON a.id = p.id) "
    "AS u(venue_id, screen_id, hour, plays) WHERE true GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)
"""screen_plays rows from the plays whose screens the writer knew (`known`: venue, screen, hour, plays) and
those it located through their ad requests (`played`: id, at), one per key."""
SCREEN_PLAYS_UPSERT = (
    "ON CONFLICT (venue_id, screen_id, hour) DO UPDATE SET plays = screen_plays.plays + excluded.plays"
)


StatusRow = tuple[str, str, int, int | None, int | None, int | None, int, int, int]
"""A screen_status row as a batch writes it, in SCREEN_STATUS_COLUMNS' order."""
PlaysRow = tuple[str, str, int, int]
"""A screen_plays row: venue, screen, UTC hour of the plays, plays."""


@dataclass(slots=True)
class Batch:
    """One batch's plan and state; pure: the store feeds it what it read and writes what it returns."""

    operations: Sequence[Operation]
    issues: list[Issue] = field(default_factory=list)
    fires: list[Fire] = field(default_factory=list)
    releases: list[Release] = field(default_factory=list)
    settles: list[Settle] = field(default_factory=list)
    no_fills: list[NoFill] = field(default_factory=list)
    current: dict[uuid.UUID, Current] = field(default_factory=dict)
    changes: dict[uuid.UUID, RowChange] = field(default_factory=dict)
    fire_verdicts: list[Verdict] = field(default_factory=list)
    release_verdicts: list[Verdict] = field(default_factory=list)
    settled: int = 0
    released_claims: list[str] = field(default_factory=list)
    delivered_claims: list[str] = field(default_factory=list)
    counters: dict[str, Counter] = field(default_factory=dict)
    original: dict[str, Snapshot] = field(default_factory=dict)
    issue_verdicts: list[Verdict] = field(default_factory=list)
    admitted: list[tuple[AdRequest, str | None]] = field(default_factory=list)
    """Ad requests to insert, each with its claims column as admitted."""
    wins: list[Win] = field(default_factory=list)
    """The winning bids of the programmatic ones among them, to insert with them."""
    judge: Judge | None = None
    """The invalid-traffic rules its fires are judged by (None: none)."""

    @classmethod
    def of(cls, operations: Sequence[Operation], judge: Judge | None = None) -> Batch:
        batch = cls(operations, judge=judge)
        for op in operations:
            if isinstance(op, Fire):
                batch.fires.append(op)
            elif isinstance(op, Issue):
                batch.issues.append(op)
            elif isinstance(op, Release):
                batch.releases.append(op)
            elif isinstance(op, Settle):
                batch.settles.append(op)
            else:
                batch.no_fills.append(op)
        return batch

    # -- step 1 ------------------------------------------------------------------------------------------

    def named_ids(self) -> list[uuid.UUID]:
        """The ad requests fires and releases name, each once (PostgreSQL orders its locks in SQL)."""
        ids = {f.ad_request_id for f in self.fires}
        if self.releases:
            ids.update(r.ad_request_id for r in self.releases)
        return list(ids)

    def due(self) -> tuple[int, int] | None:
        """(expired before, at most how many) for the expiry settle, or None without a Settle."""
        if not self.settles:
            return None
        return max(s.now - s.grace for s in self.settles), max(s.limit for s in self.settles)

    def prune(self) -> tuple[int, int] | None:
        """(closed before, at most how many) for dropping counters, or None without a Settle (step 5)."""
        if not self.settles:
            return None
        return min(s.now - s.retention for s in self.settles), max(s.limit for s in self.settles)

    def answers_before(self) -> int | None:
        """Drop answers sent before this, or None without a Settle (step 6)."""
        if not self.settles:
            return None
        return min(s.now for s in self.settles) - ANSWER_RETENTION_SECONDS

    # -- step 2 ------------------------------------------------------------------------------------------

    def resolve(self, due: Sequence[uuid.UUID]) -> None:
        """Fires first (an impression counted now makes a release `played`), then releases, then expiry."""
        if self.fires:
            self.fire_verdicts, self.changes = resolve(self.fires, self.current, self.judge)
        if self.releases:
            self.release_verdicts = resolve_releases(self.releases, self.current, self.changes)
        if due:
            self.settled = resolve_settles(due, self.current, self.changes, self.settles[0].now)
        self.delivered_claims, self.released_claims = counter_moves(self.current, self.changes)

    # -- step 3 ------------------------------------------------------------------------------------------

    def counter_keys(self) -> list[str]:
        """Every counter this batch may read or write, each once, sorted so a batch's statements are
        deterministic (PostgreSQL takes the row locks in its own ORDER BY key, the same for every worker)."""
        keys: set[str] = set()
        for issue in self.issues:
            if issue.claims:
                keys.update(claim_keys(issue.claims))
        for text in (*self.delivered_claims, *self.released_claims):
            keys.update(key for key, _ in parse_claims(text))
        return sorted(keys)

    def load(self, rows: Sequence[Sequence[object]]) -> None:
        """Counter rows as read under the lock: (key, cap, reserved, delivered, last_at)."""
        for key, cap, reserved, delivered, last_at in rows:
            counter = Counter(
                None if cap is None else int(cap),  # type: ignore[call-overload]
                int(reserved),  # type: ignore[call-overload]
                int(delivered),  # type: ignore[call-overload]
                None if last_at is None else int(last_at),  # type: ignore[call-overload]
            )
            self.counters[str(key)] = counter
            self.original[str(key)] = counter.snapshot()

    # -- step 4 ------------------------------------------------------------------------------------------

    def admit(self) -> None:
        """Move the settled reservations, then admit the issues in submission order."""
        for text in self.delivered_claims:
            deliver(text, self.counters)
        for text in self.released_claims:
            release(text, self.counters)
        for issue in self.issues:
            claims = issue.claims
            record = issue.record
            if claims:
                reason = admit(claims, record.play_time, self.counters)
                if reason is not None:
                    self.issue_verdicts.append(Verdict("rejected", reason=reason))
                    continue
            self.admitted.append((record, claims_json(claims) if claims else None))
            if issue.win is not None:
                self.wins.append(issue.win)
            self.issue_verdicts.append(Verdict("issued", record.expires_at))

    def counter_writes(self) -> list[tuple[str, int | None, int, int, int | None]]:
        """Counters this batch changed (or created), sorted by key, as (key, cap, reserved, delivered,
        last_at)."""
        writes = []
        for key in sorted(self.counters):
            snapshot = self.counters[key].snapshot()
            if self.original.get(key) != snapshot:
                writes.append((key, *snapshot))
        return writes

    def stats(self) -> list[tuple[str, str, int, int, int]]:
        """(venue, screen or "", UTC hour of play_time, requests, fills): one row per key, sorted.

        An issued ad request is a request and a fill; a no-fill is a request. A rejected Issue counts nothing:
        its slot is retried with another campaign and ends as an issue or a NoFill, counted then.
        """
        rows: dict[tuple[str, str, int], list[int]] = {}
        for record, _ in self.admitted:
            key = (record.venue_id, record.screen_id or "", record.play_time - record.play_time % HOUR)
            row = rows.setdefault(key, [0, 0])
            row[0] += 1
            row[1] += 1
        for op in self.no_fills:
            key = (op.venue_id, op.screen_id or "", op.play_time - op.play_time % HOUR)
            rows.setdefault(key, [0, 0])[0] += 1
        return [(*key, requests, fills) for key, (requests, fills) in sorted(rows.items())]

    def key_stats(self) -> list[tuple[int, int, int, int]]:
        """(API key, UTC hour of play_time, requests, fills): stats() counted per key instead of per screen,
        one row per key and hour, sorted (PostgreSQL locks the rows in this order, after request_stats').
        An ad request without a key (the simulator's) is left out: there is no integration to count it for.
        """
        rows: dict[tuple[int, int], list[int]] = {}
        for record, _ in self.admitted:
            if record.key_id is not None:
                row = rows.setdefault((record.key_id, record.play_time - record.play_time % HOUR), [0, 0])
                row[0] += 1
                row[1] += 1
        for op in self.no_fills:
            if op.key_id is not None:
                rows.setdefault((op.key_id, op.play_time - op.play_time % HOUR), [0, 0])[0] += 1
        return [(*key, requests, fills) for key, (requests, fills) in sorted(rows.items())]

    def screen_requests(self, now: int) -> list[tuple[str, str, int, int | None, int]]:
        """(venue, screen or "", last request, last fill or None, fills) per screen this batch's ad requests
        named, sorted: what screen_status learns of them, `now` being when the batch is written (one row per
        screen however many requests it made, so the cost per request is a dict update)."""
        fills: dict[tuple[str, str], int] = {}
        for record, _ in self.admitted:
            key = (record.venue_id, record.screen_id or "")
            fills[key] = fills.get(key, 0) + 1
        for op in self.no_fills:
            key = (op.venue_id, op.screen_id or "")
            fills.setdefault(key, 0)
        return [
            (venue, screen, now, now if count else None, count)
            for (venue, screen), count in sorted(fills.items())
        ]

    def screen_rows(
        self, now: int, screens: Mapping[int, tuple[str, str | None]]
    ) -> tuple[list[StatusRow], list[PlaysRow], list[tuple[uuid.UUID, int]]]:
        """screen_status rows (SCREEN_STATUS_COLUMNS' order) and screen_plays rows, one per key, sorted: the
        batch's requests and its counted plays, each play's (venue, screen) looked up in `screens` by the
        int of its ad request's id; and (ad request, time) of the plays not found there, counted nowhere
        (the store locates them by their ad requests). One pass over the batch's changes, a few dict updates
        per play: the writer does this for every impression."""
        rows: dict[tuple[str, str], list[Any]] = {}
        for venue, screen, asked_at, fill_at, fills in self.screen_requests(now):
            rows[venue, screen] = [asked_at, fill_at, None, fills, 0]
        hours: dict[tuple[tuple[str, str | None], int], int] = {}
        last: dict[tuple[str, str | None], int] = {}
        unknown: list[tuple[uuid.UUID, int]] = []
        for ident, change in self.changes.items():
            at = change.set_times.get(IMPRESSION_COLUMN)
            if at is None:
                continue
            where = screens.get(ident.int)
            if where is None:
                unknown.append((ident, at))
                continue
            slot = (where, at - at % HOUR)
            hours[slot] = hours.get(slot, 0) + 1
            if at > last.get(where, -1):
                last[where] = at
        plays: dict[tuple[str, str, int], int] = {}
        for ((venue, named), hour), count in hours.items():
            key = (venue, named or "")
            row = rows.get(key)
            if row is None:
                row = rows[key] = [None, None, None, 0, 0]
            played = last[venue, named]
            row[2] = played if row[2] is None else max(row[2], played)
            row[4] += count
            plays[(*key, hour)] = plays.get((*key, hour), 0) + count
        status = [
            (venue, screen, now, request, fill, play, now, fills, played)
            for (venue, screen), (request, fill, play, fills, played) in sorted(rows.items())
        ]
        return status, [(*key, count) for key, count in sorted(plays.items())], unknown

    def invalid_rows(self) -> list[tuple[uuid.UUID, str, str, int, str]]:
        """(ad request, event, layer, played_at, reason) of each fire the invalid-traffic rules flagged."""
        return [
            (ident, *flagged)
            for ident, change in self.changes.items()
            if change.flagged
            for flagged in change.flagged
        ]

    def win_rows(self) -> list[tuple[Any, ...]]:
        """The demand_wins rows of the programmatic ad requests this batch admitted, WIN_COLUMNS each."""
        return [_WIN_FIELDS(win) for win in self.wins]

    def bills_due(self) -> list[tuple[int, uuid.UUID]]:
        """(impression time, ad request) of each programmatic ad request whose first impression this batch
        counts: its billing notice falls due in the same transaction, so it is owed exactly when the play is
        counted. Empty, at no cost beyond a flag test, for direct ad requests."""
        current = self.current
        return [
            (change.set_times[IMPRESSION_COLUMN], ident)
            for ident, change in self.changes.items()
            if IMPRESSION_COLUMN in change.set_times and current[ident].programmatic
        ]

    def row_changes(self) -> list[tuple[uuid.UUID, RowChange]]:
        """The ad requests whose row this batch changes, with the change."""
        return [(ident, change) for ident, change in self.changes.items() if change.writes]

    # -- the answers -------------------------------------------------------------------------------------

    def _snapshots(self, keys: Sequence[str] | set[str]) -> dict[str, Snapshot]:
        counters = self.counters
        return {key: counters[key].snapshot() for key in keys if key in counters}

    def verdicts(self) -> list[Verdict]:
        """One Verdict per operation, in submission order, with the counters as this batch leaves them."""
        issues = iter(zip(self.issues, self.issue_verdicts, strict=True))
        fires = iter(self.fire_verdicts)
        releases = iter(self.release_verdicts)
        settle_verdict: Verdict | None = None
        # Each set of keys' snapshots, made once: a batch's ad requests for one campaign share theirs.
        claimed: dict[tuple[str, ...], dict[str, Snapshot]] = {}
        out: list[Verdict] = []
        for op in self.operations:
            if isinstance(op, Fire):
                out.append(next(fires))
            elif isinstance(op, Issue):
                issue, verdict = next(issues)
                if issue.claims:
                    claim_set = tuple(claim_keys(issue.claims))
                    counters = claimed.get(claim_set)
                    if counters is None:
                        counters = claimed[claim_set] = self._snapshots(claim_set)
                    verdict = verdict._replace(counters=counters)
                out.append(verdict)
            elif isinstance(op, Release):
                verdict = next(releases)
                state = self.current.get(op.ad_request_id)
                if verdict.outcome in ("released", "late") and state is not None and state.claims:
                    # The worker's cache must learn at once that the units are free again, or it would keep
                    # refusing the campaign (and the budget stay unsold) until its entry ages out.
                    keys = {key for key, _ in parse_claims(state.claims)}
                    verdict = verdict._replace(counters=self._snapshots(keys))
                out.append(verdict)
            elif isinstance(op, Settle):
                if settle_verdict is None:
                    moved = {
                        key
                        for text in (*self.released_claims, *self.delivered_claims)
                        for key, _ in parse_claims(text)
                    }
                    settle_verdict = Verdict("settled", settled=self.settled, counters=self._snapshots(moved))
                out.append(settle_verdict)
            else:
                out.append(Verdict("recorded"))
        return out
