"""Asking demand partners for bids on one slot: in parallel, each within its own `tmax`, harmless to players.

A partner is a remote server adslot does not control: it may sleep, never answer, trickle its answer byte by
byte, fail, or send garbage or a huge body. Whatever it does, its exchange (waiting for a connection,
connecting, sending, reading) is cut at its `timeout_ms`, its body is kept as it arrives and dropped past
MAX_RESPONSE_BYTES, and the outcome is classified and counted, never raised: `ask` returns within the largest
`timeout_ms` asked plus a few milliseconds. A partner that keeps failing is skipped for a while (its circuit
breaker), and one over its `max_qps` is skipped for that slot, never queued (a queued request would be late).

One `PartnerCaller` per process and environment, used from one event loop, so every partner's connections are
kept alive between slots (HTTP/1.1, a pool per origin: demand/http1.py's lean client).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal, TypeVar
from urllib.parse import urlsplit

from adslot.demand.auction import MAX_RESPONSE_BYTES, Asked, Checked, Drop, check_response
from adslot.demand.bid_request import Opportunity, build_bid_request, encode_bid_request
from adslot.demand.breaker import (
    DEFAULT_COOLDOWN_S,
    DEFAULT_MAX_COOLDOWN_S,
    DEFAULT_THRESHOLD,
    BreakerState,
    CircuitBreaker,
)
from adslot.demand.http1 import Http1Client, HttpFailure, Target, target_of
from adslot.demand.notice_rules import notice_rule
from adslot.demand.partners import Partner
from adslot.demand.terms import Deal, PartnerTerms, to_micros
from adslot.limits.bucket import TokenBucket
from adslot.vast.markup import MarkupChecks

Outcome = Literal["bid", "no_bid", "dropped", "timeout", "error", "skipped_qps", "skipped_breaker"]
"""What came of asking one partner for one slot: `bid` (at least one bid may compete), `no_bid` (204, empty
body, no bid in it), `dropped` (it answered, but no bid may compete: garbage, too large, or every bid dropped
by the auction's checks, see `Checked.drops`), `timeout` (no whole answer within its `timeout_ms`), `error`
(connect, protocol, HTTP status, unsafe markup...: see `PartnerOutcome.reason`), `skipped_qps` and
`skipped_breaker` (not asked)."""

REQUEST_HEADERS = {
    "Content-Type": "application/json",
    "x-openrtb-version": "2.6",
    "User-Agent": "adslot",
}
_NO_HEADERS: Mapping[str, tuple[str, str]] = {}
DEFAULT_MAX_CONNECTIONS_PER_HOST = 64
"""Connections open at once to one partner host: a partner that holds every connection it is given cannot
take them all, and the requests past it wait (within their timeout) rather than open more."""
KEEPALIVE_EXPIRY_S = 30.0
"""An idle connection is kept this long: a partner asked a few times a minute still skips the handshake."""
_GARBAGE = frozenset({"bad_json", "too_large"})
"""Drops of a whole answer that count as the partner failing, for its breaker: it answers, but uselessly."""
_HOSTILE = frozenset({"unsafe_markup"})
"""Drops of a whole answer that are the partner's errors (an `error` outcome): markup built to cost adslot."""


@dataclass(frozen=True, slots=True)
class PartnerOutcome:
    partner: str
    outcome: Outcome
    reason: str | None = None
    """Why, for an `error` (`connect`, `http_500`, `protocol`, `read`, `unsafe_markup`...), a `timeout`
    (`timeout`), a skip (`max_qps`, `breaker_open`, `probe_in_flight`), or a whole-answer drop (`bad_json`,
    `too_large`)."""
    elapsed_ms: float = 0.0
    checked: Checked | None = None
    """The answer sorted into bids and drops; None when nothing usable came back."""


@dataclass(frozen=True, slots=True)
class AskResult:
    transaction_id: str
    """`source.tid`, shared by every partner asked for the slot."""
    outcomes: tuple[PartnerOutcome, ...]
    """Skips first, then the partners asked, in the order their exchanges ended."""

    @property
    def checked(self) -> tuple[Checked, ...]:
        """What `run_auction` takes: every answer, in arrival order (earlier wins a tie)."""
        return tuple(item.checked for item in self.outcomes if item.checked is not None)


@dataclass(slots=True)
class PartnerTally:
    """What happened to one partner since the process started, for reports and /metrics."""

    requests: int = 0
    """Bid requests sent (skips are not requests)."""
    bids: int = 0
    """Answers with at least one bid that may compete."""
    no_bids: int = 0
    dropped: int = 0
    timeouts: int = 0
    errors: int = 0
    errors_by_reason: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    """Bids (or whole answers) dropped, by `DropReason`; a no-bid answer is not a drop."""
    skipped: dict[str, int] = field(default_factory=dict)
    """`skipped_qps`, `skipped_breaker`."""
    breaker: BreakerState = "closed"

    def snapshot(self, breaker: BreakerState) -> PartnerTally:
        return replace(
            self,
            errors_by_reason=dict(self.errors_by_reason),
            drops=dict(self.drops),
            skipped=dict(self.skipped),
            breaker=breaker,
        )


def terms_of(partner: Partner) -> PartnerTerms:
    """The terms a stored partner is asked under: its floor, auction, timeout, deals and blocked domains."""
    return PartnerTerms(
        partner.name,
        floor_cpm_micros=to_micros(partner.floor_cpm),
        currency=partner.currency,
        auction=partner.auction,
        tmax_ms=partner.timeout_ms,
        deals=tuple(
            Deal(deal.id, to_micros(deal.floor_cpm), frozenset(deal.buyer_seats or ()), deal.at)
            for deal in partner.deals
        ),
        blocked_domains=frozenset(partner.blocked_domains),
        notices=notice_rule(partner.endpoint, tuple(partner.notice_hosts)),
    )


def eligible(partner: Partner, venue_id: str) -> bool:
    """Active, and either open to every venue or naming this one: the others are not even considered."""
    return partner.status == "active" and (partner.venues is None or venue_id in partner.venues)


class _Exchange(Exception):
    """Ends one exchange early with its outcome (an HTTP status that is not a success)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _TooLarge(Exception):
    """The answer declares a body over MAX_RESPONSE_BYTES: dropped before a byte of it is read."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class PartnerCaller:
    """Sends one OpenRTB bid request per eligible partner, in parallel, and tallies what came of each."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.monotonic,
        breaker_threshold: int = DEFAULT_THRESHOLD,
        breaker_cooldown: float = DEFAULT_COOLDOWN_S,
        breaker_max_cooldown: float = DEFAULT_MAX_COOLDOWN_S,
        max_connections_per_host: int = DEFAULT_MAX_CONNECTIONS_PER_HOST,
        terms: Callable[[Partner], PartnerTerms] = terms_of,
    ) -> None:
        """`clock` (monotonic seconds) drives breakers and rate buckets only; timeouts are real time."""
        self._clock = clock
        self._breaker_args = (breaker_threshold, breaker_cooldown, breaker_max_cooldown)
        self._per_host = max_connections_per_host
        self._terms = terms
        self._breakers: dict[str, CircuitBreaker] = {}
        self._buckets: dict[str, TokenBucket] = {}
        self._tallies: dict[str, PartnerTally] = {}
        self._hosts: dict[str, asyncio.Semaphore] = {}
        self._endpoints: dict[str, tuple[Target, asyncio.Semaphore]] = {}
        """Per endpoint, parsed once: where it is and its host's semaphore (not per bid request)."""
        self._heads: dict[tuple[str, tuple[str, str] | None], bytes] = {}
        """Per endpoint and credential, the bid request's head up to its Content-Length value, made once."""
        self._partner_terms: dict[str, tuple[Partner, PartnerTerms]] = {}
        """Per partner name, the terms last made and the partner they came from: remade when it changed."""
        self._markups = MarkupChecks()
        self._client = Http1Client(keepalive_s=KEEPALIVE_EXPIRY_S)

    async def ask(
        self,
        partners: Sequence[Partner],
        opportunity: Opportunity,
        now: int,
        headers: Mapping[str, tuple[str, str]] = _NO_HEADERS,
    ) -> AskResult:
        """Ask every eligible partner for a bid on `opportunity` (`now`: Unix seconds, for `imp.exp`), each
        with its credential header from `headers` (by partner name), if it has one.

        Returns within the largest `timeout_ms` of the partners asked plus a few milliseconds; never raises
        for anything a partner does."""
        transaction_id = str(uuid.uuid4())
        skipped: list[PartnerOutcome] = []
        asking: list[Partner] = []
        for partner in partners:
            if not eligible(partner, opportunity.venue_id):
                continue
            skip = self._admit(partner)
            if skip is not None:
                skipped.append(skip)
                self._count(skip)
            else:
                asking.append(partner)
        ended: list[PartnerOutcome] = []
        if len(asking) == 1:  # the usual case: awaited in place, without a task and a gather to schedule
            partner = asking[0]
            await self._ask_one(partner, opportunity, now, transaction_id, ended, headers.get(partner.name))
        else:
            await asyncio.gather(
                *(
                    self._ask_one(partner, opportunity, now, transaction_id, ended, headers.get(partner.name))
                    for partner in asking
                )
            )
        return AskResult(transaction_id, (*skipped, *ended))

    def _admit(self, partner: Partner) -> PartnerOutcome | None:
        """None if the partner may be asked now, else the skip. An open breaker is looked at before the rate
        bucket, so a partner left alone spends no tokens; a half-open breaker lets its probe go only once
        the bucket has admitted it."""
        now = self._clock()
        breaker = self._breaker(partner.name)
        if breaker.state(now) == "open":
            return PartnerOutcome(partner.name, "skipped_breaker", "breaker_open")
        bucket = self._bucket(partner, now)
        if bucket is not None and bucket.take(now) > 0:
            return PartnerOutcome(partner.name, "skipped_qps", "max_qps")
        if not breaker.allow(now):
            return PartnerOutcome(partner.name, "skipped_breaker", "probe_in_flight")
        return None

    async def _ask_one(
        self,
        partner: Partner,
        opportunity: Opportunity,
        now: int,
        transaction_id: str,
        ended: list[PartnerOutcome],
        credential: tuple[str, str] | None,
    ) -> None:
        request_id = uuid.uuid4().hex
        started = time.perf_counter()
        try:
            terms = self._terms_for(partner)
            asked = Asked(terms, request_id)
            request = build_bid_request(
                opportunity, terms, request_id=request_id, transaction_id=transaction_id, now=now
            )
            body = encode_bid_request(request)
            async with asyncio.timeout(partner.timeout_ms / 1000):
                status, answer = await self._exchange(partner.endpoint, body, credential)
            outcome = _classify(partner.name, asked, status, answer, self._markups)
        except TimeoutError:
            outcome = PartnerOutcome(partner.name, "timeout", "timeout")
        except _Exchange as stop:
            outcome = PartnerOutcome(partner.name, "error", stop.reason)
        except _TooLarge as large:
            outcome = _too_large(asked, large.size)
        except HttpFailure as failure:
            outcome = PartnerOutcome(partner.name, "error", failure.reason)
        except ValueError:  # an endpoint or a credential that cannot be written in a request
            outcome = PartnerOutcome(partner.name, "error", "bad_endpoint")
        except Exception as error:  # a bug here must not cost the player its ad: count it, name it
            outcome = PartnerOutcome(partner.name, "error", f"internal_{type(error).__name__}")
        elapsed_ms = (time.perf_counter() - started) * 1000
        outcome = PartnerOutcome(
            outcome.partner, outcome.outcome, outcome.reason, elapsed_ms, outcome.checked
        )
        self._record(outcome)
        ended.append(outcome)

    def _terms_for(self, partner: Partner) -> PartnerTerms:
        """The partner's terms, made once per version of the partner rather than once per bid request (they
        parse its endpoint and notice hosts)."""
        cached = self._partner_terms.get(partner.name)
        if cached is not None and (cached[0] is partner or cached[0] == partner):
            return cached[1]
        terms = self._terms(partner)
        _remember(self._partner_terms, partner.name, (partner, terms))
        return terms

    async def _exchange(
        self, endpoint: str, body: bytes, credential: tuple[str, str] | None
    ) -> tuple[int, bytes]:
        """POST the request (with the partner's credential header: to its endpoint only); the status and
        at most MAX_RESPONSE_BYTES + 1 bytes of the body (more is never read: the caller drops it as too
        large). Raises _Exchange for a status that is not a success, and
        _TooLarge for a declared length over the limit. The caller's `asyncio.timeout` bounds the whole
        exchange, waiting for the host's semaphore included: no timer of its own per request."""
        found = self._endpoints.get(endpoint)
        if found is None:
            found = (target_of(endpoint), self._host(endpoint))
            _remember(self._endpoints, endpoint, found)
        target, host = found
        head = self._heads.get((endpoint, credential))
        if head is None:
            head = _request_head(target, credential)
            _remember(self._heads, (endpoint, credential), head)
        request = b"%s%d\r\n\r\n%s" % (head, len(body), body)
        async with host:
            answer = await self._client.send(target.origin, request, keep=MAX_RESPONSE_BYTES)
        status = answer.status
        if not 200 <= status < 300:
            raise _Exchange(f"http_{status}")
        if status == 204:
            return 204, b""
        if answer.declared is not None and answer.declared > MAX_RESPONSE_BYTES:
            raise _TooLarge(answer.declared)
        return status, answer.body

    def _host(self, endpoint: str) -> asyncio.Semaphore:
        parts = urlsplit(endpoint)
        origin = f"{parts.scheme}://{parts.netloc}"
        semaphore = self._hosts.get(origin)
        if semaphore is None:
            semaphore = self._hosts[origin] = asyncio.Semaphore(self._per_host)
        return semaphore

    def _breaker(self, name: str) -> CircuitBreaker:
        breaker = self._breakers.get(name)
        if breaker is None:
            breaker = self._breakers[name] = CircuitBreaker(*self._breaker_args)
        return breaker

    def _bucket(self, partner: Partner, now: float) -> TokenBucket | None:
        """One second's worth of burst: a partner's max_qps is a promise to it, so adslot spends little
        ahead. A changed max_qps starts a new, full bucket."""
        if partner.max_qps is None:
            self._buckets.pop(partner.name, None)
            return None
        bucket = self._buckets.get(partner.name)
        if bucket is None or bucket.rate != partner.max_qps:
            bucket = self._buckets[partner.name] = TokenBucket(partner.max_qps, partner.max_qps, now)
        return bucket

    def _record(self, outcome: PartnerOutcome) -> None:
        """Tally the outcome and tell the partner's breaker: timeouts, errors and garbage are failures."""
        self._count(outcome)
        breaker = self._breaker(outcome.partner)
        now = self._clock()
        if outcome.outcome in ("timeout", "error") or outcome.reason in _GARBAGE:
            breaker.failure(now)
        else:
            breaker.success(now)

    def _count(self, outcome: PartnerOutcome) -> None:
        tally = self._tallies.setdefault(outcome.partner, PartnerTally())
        kind = outcome.outcome
        if kind in ("skipped_qps", "skipped_breaker"):
            tally.skipped[kind] = tally.skipped.get(kind, 0) + 1
            return
        tally.requests += 1
        if kind == "bid":
            tally.bids += 1
        elif kind == "no_bid":
            tally.no_bids += 1
        elif kind == "dropped":
            tally.dropped += 1
        elif kind == "timeout":
            tally.timeouts += 1
        else:
            tally.errors += 1
            reason = outcome.reason or "unknown"
            tally.errors_by_reason[reason] = tally.errors_by_reason.get(reason, 0) + 1
        for drop in outcome.checked.drops if outcome.checked is not None else ():
            if drop.reason != "no_bid":
                tally.drops[drop.reason] = tally.drops.get(drop.reason, 0) + 1

    def state(self, name: str) -> BreakerState:
        """The partner's breaker: `closed` (asked), `open` (skipped), `half_open` (one probe may go)."""
        breaker = self._breakers.get(name)
        return breaker.state(self._clock()) if breaker is not None else "closed"

    def outcome_counts(self) -> dict[str, tuple[dict[str, int], bool]]:
        """Per partner: how often each outcome came, and whether its breaker is not closed (for /metrics)."""
        counts: dict[str, tuple[dict[str, int], bool]] = {}
        for name, tally in self._tallies.items():
            outcomes = {
                "bid": tally.bids,
                "no_bid": tally.no_bids,
                "dropped": tally.dropped,
                "timeout": tally.timeouts,
                "error": tally.errors,
                **tally.skipped,
            }
            counts[name] = (outcomes, self.state(name) != "closed")
        return counts

    def tallies(self) -> dict[str, PartnerTally]:
        """A copy of every partner's tally, with its breaker state now, by partner name."""
        return {name: tally.snapshot(self.state(name)) for name, tally in sorted(self._tallies.items())}

    async def close(self) -> None:
        """Close every kept-alive connection; call it from the event loop the caller was used in."""
        await self._client.close()


_K = TypeVar("_K")
_V = TypeVar("_V")
_MEMO_MAX = 1024
"""Entries kept per memo (endpoints, credentials, partners' terms): far more than a network's partners; a
memo past it starts over, so renamed partners and rotated credentials cannot grow it without bound."""


def _remember(memo: dict[_K, _V], key: _K, value: _V) -> None:
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = value


def _request_head(target: Target, credential: tuple[str, str] | None) -> bytes:
    """A bid request's head up to the value of its Content-Length, with the partner's credential header.
    ValueError for a credential that would split the head (a name or value with a line break, a name with a
    colon or a space): it is never written."""
    lines = [f"POST {target.path} HTTP/1.1", f"Host: {target.host}"]
    lines += [f"{name}: {value}" for name, value in REQUEST_HEADERS.items()]
    lines.append("Accept-Encoding: identity")
    if credential is not None:
        name, value = credential
        if not name or any(c in name for c in ":\r\n \t") or any(c in value for c in "\r\n\x00"):
            raise ValueError("the credential header cannot be written in a request head")
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\nContent-Length: ").encode("latin-1")


def _classify(name: str, asked: Asked, status: int, body: bytes, markups: MarkupChecks) -> PartnerOutcome:
    checked = check_response(asked, None if status == 204 else body, markups)
    if checked.bids:
        return PartnerOutcome(name, "bid", checked=checked)
    whole = checked.drops[0].reason if len(checked.drops) == 1 and checked.drops[0].bid is None else None
    if whole == "no_bid":
        return PartnerOutcome(name, "no_bid", checked=checked)
    if whole in _HOSTILE:
        return PartnerOutcome(name, "error", whole, checked=checked)
    return PartnerOutcome(name, "dropped", whole, checked=checked)


def _too_large(asked: Asked, size: int) -> PartnerOutcome:
    detail = f"response of {size} bytes (declared) exceeds {MAX_RESPONSE_BYTES}"
    drop = Drop(asked.terms.name, asked.request_id, "too_large", detail)
    return PartnerOutcome(asked.terms.name, "dropped", "too_large", checked=Checked(asked, (), (drop,)))
