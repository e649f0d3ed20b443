"""What the ledger stores and answers: ad requests, Proof-of-Play operations and their outcomes."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple, get_args

from adslot.ledger.budget import Reason, Snapshot
from adslot.ledger.claims import Claims
from adslot.ledger.ivt import IvtReason
from adslot.settings import DEFAULTS, MAX_BATCHES_IN_FLIGHT

Event = Literal["impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]
Layer = Literal["wrapper", "inline"]
Outcome = Literal[
    "issued",
    "rejected",
    "counted",
    "duplicate",
    "echo",
    "late",
    "unknown",
    "released",
    "already_released",
    "played",
    "settled",
    "recorded",
    "invalid",
]
SettleReason = Literal["released", "expired", "played"]

EVENT_COLUMNS: dict[str, str] = {
    "impression": "impression_at",
    "start": "start_at",
    "firstQuartile": "first_quartile_at",
    "midpoint": "midpoint_at",
    "thirdQuartile": "third_quartile_at",
    "complete": "complete_at",
}

FIRE_BITS: Mapping[tuple[str, str], int] = MappingProxyType(
    {
        (event, layer): 1 << (2 * n + k)
        for n, event in enumerate(EVENT_COLUMNS)
        for k, layer in enumerate(get_args(Layer))
    }
)
"""The bit of the ad request's `fired` column that each (event, VAST layer) sets with its first fire: a repeat
finds its bit set and is a duplicate; the first layer to fire an event also sets the event's time, the other
layer's first fire is an echo. Stored values: never renumber (migration 0005 wrote them from pop_fires)."""


@dataclass(frozen=True, slots=True)
class AdRequest:
    id: uuid.UUID
    account_id: int
    venue_id: str
    screen_id: str | None
    play_time: int
    created_at: int
    expires_at: int
    campaign_id: int | None
    """None for an ad request a demand partner won: its creative is the buyer's (demand_wins)."""
    creative_id: int | None
    impression_at: int | None = None
    start_at: int | None = None
    first_quartile_at: int | None = None
    midpoint_at: int | None = None
    third_quartile_at: int | None = None
    complete_at: int | None = None
    duplicate_count: int = 0
    late_count: int = 0
    impressions: float = 1.0
    claims: str | None = None
    settled_at: int | None = None
    settle_reason: str | None = None
    key_id: int | None = None
    """The API key that asked for it (one key, one player integration: the Health page's unit); None for ad
    requests stored before migration 0009, or asked for without a key (the simulator)."""
    source_network: int | None = None
    """The network the ad request came from (ivt.network_key), for the foreign_network rule; None: unknown."""
    duration_seconds: int | None = None
    """Its creative's duration when it was issued, for the too_fast rule; None: unknown."""

    def state(self, now: int) -> str:
        """issued until its impression (played), its player gives it back (released) or its expiry passes
        unplayed (expired)."""
        if self.impression_at is not None:
            return "played"
        if self.settle_reason == "released":
            return "released"
        return "expired" if now > self.expires_at else "issued"


@dataclass(frozen=True, slots=True)
class Win:
    """The winning bid of an ad request a demand partner won, stored (demand_wins) with its ad request, in
    the same transaction: the inline VAST serves its markup, and its `burl` is called once the ad request's
    impression is counted. Plain values, for the ledger carries it without knowing OpenRTB."""

    ad_request_id: uuid.UUID
    partner: str
    demand_creative_id: int | None
    crid: str | None
    auction_id: str
    bid_id: str | None
    imp_id: str
    seat: str | None
    ad_id: str | None
    deal_id: str | None
    adomain: str | None
    """JSON list of the advertiser's domains, as bid."""
    bid_price_micros: int
    price_micros: int
    """The clearing CPM, in micros of `currency`."""
    min_to_win_micros: int
    currency: str
    multiplier: float
    """Impressions one play is worth, as the bid request's `imp.qty.multiplier` said (1 without one)."""
    adm: str | None
    """The buyer's VAST with its win macros substituted; None: `nurl` serves it."""
    nurl: str | None
    burl: str | None
    """A template still: ${AUCTION_IMP_TS} is the play's time, known only when its impression counts."""
    play_time: int
    created_at: int


WIN_COLUMNS = tuple(Win.__dataclass_fields__)
"""demand_wins' columns an Issue writes, in Win's field order; the billing columns keep their defaults."""


@dataclass(frozen=True, slots=True)
class Issue:
    """Store `record` if its claims are admitted (all reserved at once), else refuse it and store nothing.

    `claims` is what admission checks and what the stored record holds (the store writes the claims column
    from it, so the two cannot disagree); None or empty Claims is an ad request that reserves nothing.
    """

    record: AdRequest
    claims: Claims | None = None
    win: Win | None = None
    """The winning bid of a programmatic ad request, stored with it (None for a direct one)."""


class Fire(NamedTuple):
    """A pixel fire as received; the store decides, under its write lock, what it counts as.

    A NamedTuple, like Verdict, rather than a frozen dataclass: each pixel makes two of each (worker and
    writer process), and a frozen dataclass's __init__ costs 0.37-0.47 µs against 0.17 µs here."""

    ad_request_id: uuid.UUID
    event: str
    layer: str
    at: int
    """When it was played: a live pixel's arrival, an offline player's played_at (the stored event time)."""
    source: int = 0
    """The network it came from (ivt.network_key), for the invalid-traffic rules; 0: unknown."""


@dataclass(frozen=True, slots=True)
class Release:
    """The player gives its slot back before playing it: its reservations are returned at once.

    Answers released, already_released, played (a played ad cannot be released), late (after its expiry: it
    is settled as expired instead) or unknown (no such ad request, or another account's).
    """

    ad_request_id: uuid.UUID
    account_id: int
    at: int


SETTLE_LIMIT = 1000
"""Most ad requests one Settle settles: a sweep that finds more submits another at once."""
SETTLE_GRACE_SECONDS = 60
"""How long after expiry an ad request stays unsettled, so that a fire received in time (at <= expiry) but
still queued in another worker's batch is committed first, and the ad request is settled as played (its
reservation delivered), not as expired (returned)."""


COUNTER_RETENTION_SECONDS = DEFAULTS.counter_retention_seconds
"""How long a delivery counter is kept after its hour or day closed (claims.closes_at), unless
ADSLOT_COUNTER_RETENTION_HOURS says otherwise."""


@dataclass(frozen=True, slots=True)
class Settle:
    """The expiry sweep: settle up to `limit` ad requests that expired before now - `grace`.

    Unplayed ones are released (reason "expired"); played ones deliver their claims (reason "played": reserved
    units become delivered ones). Either takes them out of the unsettled-expiry index. The same
    batch drops up to `limit` delivery counters whose window closed before now - `retention` and that hold
    no reservation (those cannot be claimed or moved again), so the table stays the size of its live windows.
    """

    now: int
    limit: int = SETTLE_LIMIT
    grace: int = SETTLE_GRACE_SECONDS
    retention: int = COUNTER_RETENTION_SECONDS


@dataclass(frozen=True, slots=True)
class NoFill:
    """An ad request answered with no ad: counted in request_stats (the denominator of the fill rate), and in
    key_stats under its key."""

    venue_id: str
    screen_id: str | None
    play_time: int
    key_id: int | None = None


NO_COUNTERS: Mapping[str, Snapshot] = MappingProxyType({})


class Verdict(NamedTuple):
    """What an operation came to, with the ad request's expiry (None when it is unknown).

    Fire: "invalid" with `reason` the invalid-traffic rule that flagged it (ivt.py). Issue: "issued" or
    "rejected" with `reason`; `counters` holds the claimed counters as committed, as
    (cap, reserved, delivered, last_at), so the worker's DeliveryCache learns what the ledger knows. Settle:
    "settled", with `settled` the number of ad requests settled and `counters` those it moved. NoFill:
    "recorded".
    """

    outcome: Outcome
    expires_at: int | None = None
    reason: Reason | IvtReason | None = None
    counters: Mapping[str, Snapshot] = NO_COUNTERS
    settled: int = 0


Operation = Issue | Fire | Release | Settle | NoFill


def reserves(op: Operation) -> bool:
    """Whether `op` may lock delivery counters: an ad request that reserves, a release, the sweep. A pixel's
    Fire never does (its delivery waits for the settlement) and answers at the first test, which every
    operation a worker batches goes through."""
    if type(op) is Fire:
        return False
    return (isinstance(op, Issue) and bool(op.claims)) or isinstance(op, (Release, Settle))


ANSWER_SLOTS = 64
"""Rows each worker process keeps in ledger_answers: a frame is stored in slot seq % ANSWER_SLOTS. A worker
has only its batches in flight unanswered at once (2 by default, at most ANSWER_SLOTS - 1), numbered in a row,
so a slot is overwritten only after the frame before it in that slot was answered."""
assert MAX_BATCHES_IN_FLIGHT < ANSWER_SLOTS, "a slot must not be reused while its frame is unanswered"
ANSWER_RETENTION_SECONDS = 24 * 3600
"""How long the expiry sweep keeps an answer: far longer than a worker takes to resend its frames."""


class Receipt(NamedTuple):
    """One worker's frame within a batch: operations[start:stop] came in it (frame `seq` of worker `client`,
    sent at `at`), and the store keeps their answer under (client, seq) in the batch's own transaction."""

    client: bytes
    seq: int
    at: int
    start: int
    stop: int


class AlreadyAnswered(RuntimeError):
    """A resent frame whose batch was committed before, by a writer that died before it could answer: this
    transaction is rolled back, and the frame is answered from ledger_answers instead."""


COLUMNS = (
    "id",
    "account_id",
    "venue_id",
    "screen_id",
    "play_time",
    "created_at",
    "expires_at",
    "campaign_id",
    "creative_id",
    "impression_at",
    "start_at",
    "first_quartile_at",
    "midpoint_at",
    "third_quartile_at",
    "complete_at",
    "duplicate_count",
    "late_count",
    "impressions",
    "claims",
    "settled_at",
    "settle_reason",
    "key_id",
    "source_network",
    "duration_seconds",
)
ISSUE_COLUMNS = (*COLUMNS[:9], "impressions", "key_id", "source_network", "duration_seconds", "claims")
