"""Filling one slot: decide, reserve durably, and decide again if the reservation lost a race.

The decision reads this worker's cached view of caps, pacing, frequency and separation; the ledger is the
authority and admits or rejects the reservation under its write lock. A rejection (another worker took the
last unit, or the cache was stale) refreshes the cache and the slot goes to the next best campaign. The HTTP
handler and the simulator share this code, so the simulator measures the engine that serves.

Demand partners (demand/) compete only for what the open tier may sell: a sponsorship, or a campaign that
reserves (caps, pacing, frequency, separation: its delivery is promised), keeps the slot without an auction.
Otherwise, when an active partner may bid on the venue, the partners are asked once, and the best bid wins
if it beats the direct open-tier campaign's CPM (a standard campaign without one defends the slot at 0; a
house campaign does not defend it). With no partner for the venue, none of this costs anything.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from adslot.catalog import Catalog
from adslot.decision.choose import Choice, choose
from adslot.decision.model import LiveCampaign, VenueProfile
from adslot.decision.slot import Slot, make_slot
from adslot.demand.exchange import Exchange, opportunity_for
from adslot.demand.partners import Partner
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.claims import Claims, impressions_for, plan_claims
from adslot.ledger.records import AdRequest, Issue, NoFill, Operation, Verdict


class Submits(Protocol):
    """Where fill_slot sends its ledger operations: the group committer, or the forecast's in-memory drive."""

    def submit(self, operation: Operation, /) -> Awaitable[Verdict]: ...


MAX_TRIES = 3
"""Reservations refused in a row before the slot is answered with no ad: each refusal removes a campaign."""


@dataclass(slots=True)
class Timing:
    """Where an ad request spent its time once demand partners were asked, for its Server-Timing header: an
    integrator whose ad request took 150 ms sees that the auction took them, and a slow disk is told apart
    from a slow partner."""

    demand_ms: float | None = None
    """The auction: the partners' answers, or their timeouts; None while no partner was asked."""
    record_ms: float = 0.0
    """Waiting for the ledger to hold the outcome durably (the ad request, or the no-fill)."""

    def header(self) -> tuple[str, str] | None:
        """The Server-Timing header (W3C Server Timing), or None if no partner was asked."""
        if self.demand_ms is None:
            return None
        return ("server-timing", f"demand;dur={self.demand_ms:.1f}, record;dur={self.record_ms:.1f}")


@dataclass(frozen=True, slots=True)
class SlotRequest:
    account_id: int
    venue_id: str
    screen_id: str | None
    play_time: int
    key_id: int | None = None
    """The API key that asked (the ledger counts its ad requests, filled or not, per key); None: no key."""
    source_network: int | None = None
    """The network it came from (ledger/ivt.network_key), its fires judged against it; None: unknown."""

    def ad_request(
        self,
        ident: uuid.UUID,
        *,
        now: int,
        expires_at: int,
        impressions: float,
        campaign_id: int | None,
        creative_id: int | None,
        duration_seconds: int | None,
    ) -> AdRequest:
        """The ad request this slot is issued as: a direct campaign's creative, or (None, None) a bid's."""
        return AdRequest(
            id=ident,
            account_id=self.account_id,
            venue_id=self.venue_id,
            screen_id=self.screen_id,
            play_time=self.play_time,
            created_at=now,
            expires_at=expires_at,
            campaign_id=campaign_id,
            creative_id=creative_id,
            impressions=impressions,
            key_id=self.key_id,
            source_network=self.source_network,
            duration_seconds=duration_seconds,
        )


def open_to_bids(choice: Choice | None, claims: Claims | None) -> bool:
    """Whether demand partners may compete for a slot the decision gave to `choice` (None: no campaign)."""
    if choice is None:
        return True
    return choice.campaign.tier != "sponsorship" and not claims


def direct_price(choice: Choice | None) -> int | None:
    """The CPM (micros) a bid must beat to take the slot from the direct campaign; None: any valid bid."""
    if choice is None or choice.campaign.tier == "house":
        return None
    return choice.campaign.cpm_micros or 0


def slot_for(catalog: Catalog, request: SlotRequest) -> Slot:
    """A registered venue's profile, or a bare one (the sandbox fills any venue id)."""
    venue = catalog.venues.get(request.venue_id) or VenueProfile(request.venue_id)
    screen = catalog.screens.get((request.venue_id, request.screen_id)) if request.screen_id else None
    return make_slot(venue, request.screen_id, screen, request.play_time)


async def fill_slot(
    catalog: Catalog,
    cache: DeliveryCache,
    writer: Submits,
    rng: random.Random,
    request: SlotRequest,
    *,
    now: int,
    play_window_seconds: int,
    new_id: Callable[[], uuid.UUID],
    exchange: Exchange | None = None,
    timing: Timing | None = None,
    plan: Callable[[LiveCampaign, Slot, float], Claims] = plan_claims,
) -> tuple[AdRequest, Choice | None] | None:
    """Issue the slot's ad request durably, or count a no-fill durably and return None. The choice is None
    when a demand partner's bid won the slot. `timing`, when given, learns where the time went. `plan` is
    plan_claims, or a memo of it (the forecast's, whose campaigns do not change while it runs)."""
    slot = slot_for(catalog, request)
    impressions = impressions_for(slot.venue, slot.hour_of_week)
    planned: dict[int, Claims] = {}

    def claims_of(campaign: LiveCampaign) -> Claims:
        claims = planned.get(campaign.id)
        if claims is None:
            claims = planned[campaign.id] = plan(campaign, slot, impressions)
        return claims

    def accept(campaign: LiveCampaign) -> bool:
        return cache.accepts(claims_of(campaign), request.play_time)

    def unlimited(campaign: LiveCampaign) -> bool:
        return not claims_of(campaign)

    excluded: set[int] = set()
    bidders = exchange.bidders(catalog.partners, request.venue_id) if exchange and catalog.partners else None
    for attempt in range(MAX_TRIES + 1):
        # After MAX_TRIES refusals (concurrent requests racing for the last units of the same goals), only
        # campaigns without caps, pacing, frequency or separation are asked: the ledger cannot refuse those,
        # so a slot that a house campaign could fill is never left empty by a lost race.
        last = attempt == MAX_TRIES
        choice = choose(
            catalog.index, slot, rng, accept=unlimited if last else accept, exclude=frozenset(excluded)
        )
        if bidders and open_to_bids(choice, claims_of(choice.campaign) if choice else None):
            assert exchange is not None
            sold = await _sell(
                exchange,
                bidders,
                catalog,
                slot,
                request,
                choice,
                impressions,
                now=now,
                play_window_seconds=play_window_seconds,
                new_id=new_id,
                writer=writer,
                timing=timing,
            )
            bidders = None  # one auction per slot: a lost reservation race does not ask the partners again
            if sold is not None:
                return sold, None
        if choice is None:
            break
        claims = claims_of(choice.campaign)
        record = request.ad_request(
            new_id(),
            now=now,
            expires_at=request.play_time + play_window_seconds,
            impressions=impressions,
            campaign_id=choice.campaign.id,
            creative_id=choice.creative.id,
            duration_seconds=choice.creative.duration_seconds,
        )
        issue = Issue(record, claims or None)
        verdict = await _submit(writer, issue, timing)
        if verdict.counters:
            cache.update(verdict.counters)
        if verdict.outcome == "issued":
            return record, choice
        excluded.add(choice.campaign.id)
    no_fill = NoFill(request.venue_id, request.screen_id, request.play_time, request.key_id)
    await _submit(writer, no_fill, timing)
    return None


def _submit(writer: Submits, operation: Operation, timing: Timing | None) -> Awaitable[Verdict]:
    """The ledger's verdict to await: timed when `timing` is given, else the writer's own (no frame more)."""
    return writer.submit(operation) if timing is None else _timed(writer, operation, timing)


async def _timed(writer: Submits, operation: Operation, timing: Timing) -> Verdict:
    """The ledger's verdict on the operation, its wait added to `timing`."""
    started = time.perf_counter()
    try:
        return await writer.submit(operation)
    finally:
        timing.record_ms += (time.perf_counter() - started) * 1000


async def _sell(
    exchange: Exchange,
    bidders: list[Partner],
    catalog: Catalog,
    slot: Slot,
    request: SlotRequest,
    choice: Choice | None,
    impressions: float,
    *,
    now: int,
    play_window_seconds: int,
    new_id: Callable[[], uuid.UUID],
    writer: Submits,
    timing: Timing | None,
) -> AdRequest | None:
    """Auction the slot; when a bid wins, store its ad request with the win and return it. Notices go out
    once the outcome is stored (or known lost to the direct campaign)."""
    ident = new_id()
    expires_at = request.play_time + play_window_seconds
    opportunity = opportunity_for(
        slot,
        registered=request.venue_id in catalog.venues,
        ad_request_id=ident,
        impressions=impressions,
        expires_at=expires_at,
    )
    started = time.perf_counter()
    sale = await exchange.auction(
        bidders,
        opportunity,
        ad_request_id=ident,
        creatives=catalog.demand_creatives,
        direct_cpm_micros=direct_price(choice),
        now=now,
        headers=catalog.partner_headers,
    )
    if timing is not None:
        timing.demand_ms = (time.perf_counter() - started) * 1000
    if sale.win is None:
        exchange.settle(sale, sold=False)
        return None
    record = request.ad_request(
        ident,
        now=now,
        expires_at=expires_at,
        impressions=impressions,
        campaign_id=None,
        creative_id=None,
        duration_seconds=sale.duration_seconds,
    )
    issue = Issue(record, None, sale.win)
    verdict = await _submit(writer, issue, timing)
    sold = verdict.outcome == "issued"
    exchange.settle(sale, sold=sold)
    return record if sold else None
