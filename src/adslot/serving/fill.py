"""Filling one slot: decide, reserve durably, and decide again if the reservation lost a race.

The decision reads this worker's cached view of caps, pacing, frequency and separation; the ledger is the
authority and admits or rejects the reservation under its write lock. A rejection (another worker took the
last unit, or the cache was stale) refreshes the cache and the slot goes to the next best campaign. The HTTP
handler and the simulator share this code, so the simulator measures the engine that serves.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from adslot.catalog import Catalog
from adslot.decision.choose import Choice, choose
from adslot.decision.model import LiveCampaign, VenueProfile
from adslot.decision.slot import Slot, make_slot
from adslot.ledger.budget import DeliveryCache
from adslot.ledger.claims import Claims, impressions_for, plan_claims
from adslot.ledger.group_commit import GroupCommitter
from adslot.ledger.records import AdRequest, Issue, NoFill, Operation, Verdict

MAX_TRIES = 3
"""Reservations refused in a row before the slot is answered with no ad: each refusal removes a campaign."""


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


def slot_for(catalog: Catalog, request: SlotRequest) -> Slot:
    """A registered venue's profile, or a bare one (the sandbox fills any venue id)."""
    venue = catalog.venues.get(request.venue_id) or VenueProfile(request.venue_id)
    screen = catalog.screens.get((request.venue_id, request.screen_id)) if request.screen_id else None
    return make_slot(venue, request.screen_id, screen, request.play_time)


async def fill_slot(
    catalog: Catalog,
    cache: DeliveryCache,
    writer: GroupCommitter[Operation, Verdict],
    rng: random.Random,
    request: SlotRequest,
    *,
    now: int,
    play_window_seconds: int,
    new_id: Callable[[], uuid.UUID],
) -> tuple[AdRequest, Choice] | None:
    """Issue the slot's ad request durably, or count a no-fill durably and return None."""
    slot = slot_for(catalog, request)
    impressions = impressions_for(slot.venue, slot.hour_of_week)
    planned: dict[int, Claims] = {}

    def claims_of(campaign: LiveCampaign) -> Claims:
        claims = planned.get(campaign.id)
        if claims is None:
            claims = planned[campaign.id] = plan_claims(campaign, slot, impressions)
        return claims

    def accept(campaign: LiveCampaign) -> bool:
        return cache.accepts(claims_of(campaign), request.play_time)

    def unlimited(campaign: LiveCampaign) -> bool:
        return not claims_of(campaign)

    excluded: set[int] = set()
    for attempt in range(MAX_TRIES + 1):
        # After MAX_TRIES refusals (concurrent requests racing for the last units of the same goals), only
        # campaigns without caps, pacing, frequency or separation are asked: the ledger cannot refuse those,
        # so a slot that a house campaign could fill is never left empty by a lost race.
        last = attempt == MAX_TRIES
        choice = choose(
            catalog.index, slot, rng, accept=unlimited if last else accept, exclude=frozenset(excluded)
        )
        if choice is None:
            break
        claims = claims_of(choice.campaign)
        record = AdRequest(
            id=new_id(),
            account_id=request.account_id,
            venue_id=request.venue_id,
            screen_id=request.screen_id,
            play_time=request.play_time,
            created_at=now,
            expires_at=request.play_time + play_window_seconds,
            campaign_id=choice.campaign.id,
            creative_id=choice.creative.id,
            impressions=impressions,
            key_id=request.key_id,
            source_network=request.source_network,
            duration_seconds=choice.creative.duration_seconds,
        )
        verdict = await writer.submit(Issue(record, claims or None))
        if verdict.counters:
            cache.update(verdict.counters)
        if verdict.outcome == "issued":
            return record, choice
        excluded.add(choice.campaign.id)
    await writer.submit(NoFill(request.venue_id, request.screen_id, request.play_time, request.key_id))
    return None
