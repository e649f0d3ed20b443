"""The billing notices (`burl`) of played programmatic ad requests: an outbox in demand_wins, sent once.

A buyer pays for what its `burl` reports, so it is called only for a play adslot counted: the ledger sets
`bill_due_at` in the very transaction that counts the ad request's first impression (never for one that
expired or was released, whose impression does not count). Each worker then claims due notices in small
batches, calls each `burl` and marks it billed:

- a claim is a write (`bill_claimed_until`), taken with FOR UPDATE SKIP LOCKED on PostgreSQL and under
  SQLite's one write lock, so two workers or nodes never hold the same notice;
- a notice whose sender died (a SIGKILL) is claimed again once its claim lapses; one whose call failed is
  retried with a growing pause, up to MAX_ATTEMPTS;
- a notice is marked billed only after its `burl` answered 2xx; the one way it reaches a buyer twice is a
  sender killed between that answer and the mark, which the buyer's own dedupe on `${AUCTION_ID}` covers;
- a `burl` its partner's notice hosts (as they are when it is due) do not admit is never called, nor retried:
  it is given up at once with its fault as its error, and counted (demand/notice_rules.py). A removed
  partner declares nothing, so its due notices are given up too.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import aiohttp
import msgspec
import sqlalchemy as sa

from adslot.demand.http import get_ok, new_session
from adslot.demand.macros import MacroValues, substitute
from adslot.demand.notice_rules import NOTHING, NOTICE_FAULTS, NoticeRule, notice_fault, notice_rule
from adslot.demand.notices import KEEPALIVE_S, NOTICE_TIMEOUT_S
from adslot.demand.stats import DemandStats
from adslot.outbox_sender import OutboxSender
from adslot.storage.database import read_transaction, write_transaction
from adslot.storage.tables import demand_partners, demand_wins

log = logging.getLogger(__name__)

CLAIM_BATCH = 100
CLAIM_SECONDS = 30
"""How long a claimed notice is held: far longer than a call (NOTICE_TIMEOUT_S) takes."""
MAX_ATTEMPTS = 12
"""Then the notice is left unbilled with its last error, for the media owner to settle with the buyer."""
MAX_PAUSE_SECONDS = 3600
IDLE_INTERVAL_SECONDS = 30.0
"""How often an environment without an active partner looks: only notices left by a partner since paused or
removed can be due there, and a worker serving no demand should not query for them twice a second."""


@dataclass(frozen=True, slots=True)
class Due:
    """A billing notice to send: the stored win's values for its macros."""

    ad_request_id: uuid.UUID
    burl: str | None
    auction_id: str
    bid_id: str | None
    imp_id: str
    seat: str | None
    ad_id: str | None
    price_micros: int
    bid_price_micros: int
    min_to_win_micros: int
    currency: str
    multiplier: float
    played_at: int
    attempts: int
    partner: str = ""
    play_time: int = 0
    endpoint: str | None = None
    """Its partner's, now; None when the partner was removed."""
    notice_hosts: str | None = None
    """Its partner's declared notice hosts as stored (JSON), now."""

    def rule(self) -> NoticeRule:
        if self.endpoint is None:
            return NOTHING
        hosts = _HOSTS.decode(self.notice_hosts) if self.notice_hosts else []
        return notice_rule(self.endpoint, tuple(hosts))


_DUE_COLUMNS = (
    demand_wins.c.ad_request_id,
    demand_wins.c.burl,
    demand_wins.c.auction_id,
    demand_wins.c.bid_id,
    demand_wins.c.imp_id,
    demand_wins.c.seat,
    demand_wins.c.ad_id,
    demand_wins.c.price_micros,
    demand_wins.c.bid_price_micros,
    demand_wins.c.min_to_win_micros,
    demand_wins.c.currency,
    demand_wins.c.multiplier,
    demand_wins.c.bill_due_at,
    demand_wins.c.bill_attempts,
    demand_wins.c.partner,
    demand_wins.c.play_time,
    demand_partners.c.endpoint,
    demand_partners.c.notice_hosts,
)
_HOSTS = msgspec.json.Decoder(list[str])


def _open(now: int) -> sa.ColumnElement[bool]:
    """Due, unbilled, unclaimed (or its claim lapsed), not given up: the partial index ix_demand_wins_bill_due
    holds exactly the due, unbilled ones."""
    return sa.and_(
        demand_wins.c.billed_at.is_(None),
        demand_wins.c.bill_due_at.is_not(None),
        sa.or_(demand_wins.c.bill_claimed_until.is_(None), demand_wins.c.bill_claimed_until < now),
        demand_wins.c.bill_attempts < MAX_ATTEMPTS,
    )


def any_due(conn: sa.Connection, now: int) -> bool:
    return conn.execute(sa.select(sa.literal(1)).where(_open(now)).limit(1)).first() is not None


def claim_due(conn: sa.Connection, now: int, limit: int = CLAIM_BATCH) -> list[Due]:
    """Claim up to `limit` open notices, oldest play first; call inside a write transaction."""
    pick = (
        sa.select(demand_wins.c.ad_request_id)
        .where(_open(now))
        .order_by(demand_wins.c.bill_due_at)
        .limit(limit)
    )
    if conn.dialect.name == "postgresql":
        pick = pick.with_for_update(skip_locked=True)
    ids = [row[0] for row in conn.execute(pick)]
    if not ids:
        return []
    conn.execute(
        sa.update(demand_wins)
        .where(demand_wins.c.ad_request_id.in_(ids))
        .values(bill_claimed_until=now + CLAIM_SECONDS, bill_attempts=demand_wins.c.bill_attempts + 1)
    )
    rows = conn.execute(
        sa.select(*_DUE_COLUMNS)
        .select_from(demand_wins.outerjoin(demand_partners, demand_partners.c.name == demand_wins.c.partner))
        .where(demand_wins.c.ad_request_id.in_(ids))
    )
    return [Due(*tuple(row)) for row in rows]


def bill_values(due: Due) -> MacroValues:
    """The macros of a billing notice: the win's, with the play's time and the impressions it was worth."""
    return MacroValues(
        auction_id=due.auction_id,
        bid_id=due.bid_id,
        imp_id=due.imp_id,
        seat_id=due.seat,
        ad_id=due.ad_id,
        price_micros=due.price_micros,
        currency=due.currency,
        mbr=due.price_micros / due.bid_price_micros if due.bid_price_micros else None,
        loss=0,
        min_to_win_micros=due.min_to_win_micros,
        multiplier=due.multiplier,
        imp_ts_ms=due.played_at * 1000,
        discount_pct=0.0,
        discount_cpm_micros=0,
    )


def mark(conn: sa.Connection, outcomes: Sequence[tuple[uuid.UUID, str | None, int]], now: int) -> None:
    """(ad request, failure or None, attempts so far) of each call: billed, or released for a retry later;
    a notice fault (never sent) is given up at once."""
    for ident, failure, attempts in outcomes:
        if failure is None:
            values: dict[str, object] = {"billed_at": now, "bill_error": None, "bill_claimed_until": None}
        elif failure in NOTICE_FAULTS:
            values = {"bill_error": failure, "bill_claimed_until": None, "bill_attempts": MAX_ATTEMPTS}
        else:
            pause = min(MAX_PAUSE_SECONDS, 2**attempts)
            values = {"bill_error": failure[:256], "bill_claimed_until": now + pause}
        conn.execute(sa.update(demand_wins).where(demand_wins.c.ad_request_id == ident).values(**values))


class BillingSender(OutboxSender):
    """One per worker and environment: looks for due notices every `interval` seconds and sends them."""

    def __init__(
        self,
        engine: sa.Engine,
        interval: float,
        *,
        active: Callable[[], bool] = lambda: True,
        idle_interval: float = IDLE_INTERVAL_SECONDS,
        name: str = "billing",
        stats: DemandStats | None = None,
    ) -> None:
        """`active`: whether the environment has a partner now (else it looks every `idle_interval`);
        `stats`: where the notices given up for a fault are counted."""
        super().__init__(name, interval)
        self._engine = engine
        self._active = active
        self._idle_interval = max(interval, idle_interval)
        self._stats = stats
        self.sent = 0
        self.failed = 0

    async def pause(self) -> None:
        """The interval; without an active partner, up to the idle interval, cut short when one appears."""
        waited = 0.0
        while True:
            await asyncio.sleep(self.interval)
            waited += self.interval
            if waited >= self._idle_interval or self._active():
                return

    def new_session(self) -> aiohttp.ClientSession:
        return new_session(KEEPALIVE_S, timeout_s=NOTICE_TIMEOUT_S)

    async def send_due(self) -> int:
        """Claim and send one batch of due notices; how many were claimed."""
        now = int(time.time())
        claimed = await self.in_thread(self._claim, now)
        if not claimed:
            return 0
        client = self.session

        async def send(due: Due) -> tuple[uuid.UUID, str | None, int]:
            if not due.burl:  # nothing to call: billed as it is counted
                return due.ad_request_id, None, due.attempts + 1
            rule = due.rule()
            fault = notice_fault(due.burl, rule)
            url = due.burl if fault is not None else substitute(due.burl, bill_values(due))
            fault = fault or notice_fault(url, rule)
            if fault is not None:
                if self._stats is not None:
                    self._stats.notice_dropped(due.partner, due.play_time, fault)
                log.info("billing notice of %s dropped: %s", due.partner, fault)
                return due.ad_request_id, fault, due.attempts + 1
            return due.ad_request_id, await get_ok(client, url), due.attempts + 1

        outcomes = await asyncio.gather(*(send(due) for due in claimed))
        for _, failure, _ in outcomes:
            if failure is None:
                self.sent += 1
            else:
                self.failed += 1
        await self.in_thread(self._mark, outcomes, int(time.time()))
        return len(claimed)

    def _claim(self, now: int) -> list[Due]:
        with read_transaction(self._engine) as conn:
            if not any_due(conn, now):  # a read, most passes: no write lock taken for nothing
                return []
        with write_transaction(self._engine) as conn:
            return claim_due(conn, now)

    def _mark(self, outcomes: Sequence[tuple[uuid.UUID, str | None, int]], now: int) -> None:
        with write_transaction(self._engine) as conn:
            mark(conn, outcomes, now)
