"""One environment's exchange: offers a slot to its demand partners and settles what comes of it.

`fill_slot` (serving/fill.py) calls `auction` only for a slot the open tier may sell (no guaranteed campaign
holds it) on a venue at least one active partner may bid on; with no partner configured, nothing here runs.
The auction's winner is stored with its ad request (ledger Issue.win), and only then are the notices sent:
`nurl` to the winner, `lurl` to every loser and to every bid dropped for a reason a buyer can act on, each
only to a host its partner declared (demand/notice_rules.py; any other is dropped and counted). The billing
notice waits for the play (demand/billing.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import msgspec
import sqlalchemy as sa

from adslot.decision.slot import Slot
from adslot.demand.auction import (
    AuctionResult,
    Checked,
    DropReason,
    Loser,
    ValidBid,
    only_playable,
    run_auction,
)
from adslot.demand.bid_request import DEFAULT_MIME_TYPES, MULTIPLIER_DECIMALS, Audience, Opportunity
from adslot.demand.caller import AskResult, PartnerCaller, eligible
from adslot.demand.creatives import CreativeStatus, reviewable
from adslot.demand.creatives_repository import note_creative
from adslot.demand.macros import MacroValues, drop_values, loss_values, substitute, win_values
from adslot.demand.notice_rules import NOTHING, NoticeRule, notice_fault, template_fault
from adslot.demand.notices import Notices
from adslot.demand.openrtb import LossReason
from adslot.demand.partners import Partner
from adslot.demand.stats import DemandStats
from adslot.ledger.records import Win
from adslot.storage.tables import demand_wins
from adslot.tasks import stop_tasks

log = logging.getLogger(__name__)

Write = Callable[[Callable[[sa.Connection], object]], Awaitable[object]]
"""Runs a function in one write transaction that bumps the catalog (Environment.run_sync(write=True))."""
Read = Callable[[Callable[[sa.Connection], object]], Awaitable[object]]

_NO_HEADERS: Mapping[str, tuple[str, str]] = {}
CACHED_WINS = 4096
"""Wins this worker keeps for the inline VAST (most are fetched within seconds, by the worker that sold
them); older ones, and those sold by other workers or nodes, are read from demand_wins."""
NOTED_LIMIT = 10_000
_STATUS_HOLD: dict[CreativeStatus, DropReason | None] = {
    "approved": None,
    "pending": "creative_pending",
    "rejected": "creative_rejected",
}


@dataclass(frozen=True, slots=True)
class Sale:
    """What the auction for one slot came to; `win` is what Issue stores when a bid won."""

    ask: AskResult
    result: AuctionResult
    play_time: int
    win: Win | None
    duration_seconds: int | None
    """The winning bid's `dur`, for the invalid-traffic rule too_fast; None when it declared none."""


@dataclass(frozen=True, slots=True)
class Markup:
    """What the inline VAST of a programmatic ad request serves: the buyer's markup, or the URL serving it."""

    adm: str | None
    nurl: str | None


def opportunity_for(
    slot: Slot, *, registered: bool, ad_request_id: uuid.UUID, impressions: float, expires_at: int
) -> Opportunity:
    """The slot as partners are asked about it; the audience only for a registered venue, whose figure its
    media owner entered (a bare sandbox venue has none to state)."""
    venue, screen = slot.venue, slot.screen
    audience = None
    if registered and round(impressions, MULTIPLIER_DECIMALS) > 0:
        audience = Audience(impressions)
    mime_types = tuple(sorted(screen.mime_types)) if screen is not None and screen.mime_types else None
    return Opportunity(
        ad_request_uuid=str(ad_request_id),
        venue_id=venue.venue_id,
        venue_name=venue.venue_id,
        play_time=slot.play_time,
        expires_at=expires_at,
        venue_type=venue.venue_type,
        timezone=venue.timezone,
        latitude=venue.latitude,
        longitude=venue.longitude,
        country=venue.country,
        region=venue.region,
        city=venue.city,
        screen_id=slot.screen_id,
        width=screen.width if screen is not None else None,
        height=screen.height if screen is not None else None,
        max_duration=screen.max_duration_seconds if screen is not None else None,
        mime_types=mime_types or DEFAULT_MIME_TYPES,
        audience=audience,
    )


class Exchange:
    def __init__(
        self,
        *,
        currency: str,
        stats: DemandStats,
        write: Write,
        read: Read,
        caller: PartnerCaller | None = None,
    ) -> None:
        self.currency = currency
        self.caller = caller or PartnerCaller()
        self.stats = stats
        self.notices = Notices()
        self._write = write
        self._read = read
        self._wins: OrderedDict[uuid.UUID, Markup] = OrderedDict()
        self._noted: set[tuple[str, str]] = set()
        self._noting: set[asyncio.Task[None]] = set()

    def bidders(self, partners: tuple[Partner, ...], venue_id: str) -> list[Partner]:
        """The partners that may bid on this venue, in the account currency."""
        return [p for p in partners if p.currency == self.currency and eligible(p, venue_id)]

    async def auction(
        self,
        partners: list[Partner],
        opportunity: Opportunity,
        *,
        ad_request_id: uuid.UUID,
        creatives: dict[tuple[str, str], tuple[int, CreativeStatus]],
        direct_cpm_micros: int | None,
        now: int,
        headers: Mapping[str, tuple[str, str]] = _NO_HEADERS,
    ) -> Sale:
        """Ask `partners` (each with its credential header in `headers`, if any) and run the auction against
        the direct open-tier CPM (None: no direct price to beat). Returns within the partners' largest
        timeout plus a few milliseconds, whatever they do."""
        ask = await self.caller.ask(partners, opportunity, now, headers)
        self.stats.count(ask, opportunity.play_time)
        by_name = {p.name: p for p in partners}

        def held(bid: ValidBid) -> DropReason | None:
            crid = bid.bid.crid
            if not crid or not reviewable(crid, bid.bid.adm, bid.bid.nurl):
                return "creative_rejected"  # it could never be approved, so it never plays
            known = creatives.get((bid.partner, crid))
            if known is not None:
                return _STATUS_HOLD[known[1]]
            partner = by_name[bid.partner]
            self._note(partner, bid, now)
            return None if partner.auto_approve else "creative_pending"

        checked = [only_playable(item, held) for item in ask.checked]
        multiplier = opportunity.audience.multiplier if opportunity.audience is not None else 1.0
        multiplier = round(multiplier, MULTIPLIER_DECIMALS)
        while True:
            result = run_auction(checked, direct_cpm_micros)
            winner = result.winner
            if winner is None:
                return Sale(ask, result, opportunity.play_time, None, None)
            bid = winner.bid
            values = win_values(winner, multiplier=multiplier)
            offer = bid.bid
            nurl = substitute(offer.nurl, values) if offer.nurl else None
            fault = None
            if nurl and not offer.adm:
                fault = notice_fault(nurl, _rules(ask).get(bid.partner, NOTHING))
            if fault is None:
                break
            # Its nurl serves its markup, and grew past what may be used once its macros were substituted:
            # it cannot play, so the auction is run again without it.
            checked = _without(checked, bid, fault)
        known = creatives.get((bid.partner, offer.crid or ""))
        win = Win(
            ad_request_id=ad_request_id,
            partner=bid.partner,
            demand_creative_id=known[0] if known is not None else None,
            crid=offer.crid,
            auction_id=bid.request_id,
            bid_id=bid.response_bid_id,
            imp_id=offer.impid,
            seat=bid.seat,
            ad_id=offer.adid,
            deal_id=offer.dealid,
            adomain=msgspec.json.encode(offer.adomain).decode() if offer.adomain is not None else None,
            bid_price_micros=bid.price_micros,
            price_micros=winner.price_micros,
            min_to_win_micros=winner.min_to_win_micros,
            currency=bid.currency,
            multiplier=multiplier,
            adm=substitute(offer.adm, values) if offer.adm else None,
            nurl=nurl,
            burl=offer.burl,
            play_time=opportunity.play_time,
            created_at=now,
        )
        return Sale(
            ask, result, opportunity.play_time, win, offer.dur if offer.dur and offer.dur > 0 else None
        )

    def settle(self, sale: Sale, *, sold: bool) -> None:
        """After the ad request was stored (`sold`: with the sale's win) or the slot went elsewhere: the win
        notice, and a loss notice for every bid that did not win, each once, in the background."""
        result = sale.result
        win = sale.win
        rules = _rules(sale.ask)

        def notify(kind: str, partner: str, template: str | None, values: MacroValues | None) -> None:
            if not template:
                return
            rule = rules.get(partner, NOTHING)
            if values is None:  # the URL as it goes (a win's nurl, substituted when the auction ended)
                url = template
                fault = notice_fault(url, rule)
            else:
                # A template over the limit is dropped before its macros are substituted; the URL after too.
                fault = template_fault(template, rule)
                url = template if fault is not None else substitute(template, values)
                if fault is None:
                    fault = notice_fault(url, rule)
            if fault is not None:
                self.stats.notice_dropped(partner, sale.play_time, fault)
                log.info("%s notice of %s dropped: %s", kind, partner, fault)
                return
            self.notices.send(kind, url)

        if sold and win is not None:
            self._remember(win)
            # A bid without markup is served by its nurl, which the player then fetches: that is its notice.
            if win.adm is not None:
                notify("win", win.partner, win.nurl, None)
        for loser in result.losers:
            notify("loss", loser.bid.partner, loser.bid.bid.lurl, loss_values(loser))
        lost = [loser.bid for loser in result.losers]
        winner = result.winner
        if not sold and winner is not None:  # the ledger could not store the sale: not the buyer's slot
            lost.append(winner.bid)
            unsold = Loser(winner.bid, LossReason.INTERNAL_ERROR, winner.price_micros)
            notify("loss", winner.bid.partner, winner.bid.bid.lurl, loss_values(unsold))
        for bid in lost:
            self.stats.lost(bid.partner, sale.play_time)
        for drop in result.drops:
            if drop.bid is not None and drop.loss is not None:
                notify("loss", drop.partner, drop.bid.lurl, drop_values(drop))

    async def markup(self, ad_request_id: uuid.UUID) -> Markup | None:
        """What the inline VAST serves for a programmatic ad request; None if no win is stored for it."""
        found = self._wins.get(ad_request_id)
        if found is not None:
            return found

        def read(conn: sa.Connection) -> Markup | None:
            row = conn.execute(
                sa.select(demand_wins.c.adm, demand_wins.c.nurl).where(
                    demand_wins.c.ad_request_id == ad_request_id
                )
            ).first()
            return Markup(row[0], row[1]) if row is not None else None

        return await self._read(read)  # type: ignore[return-value]

    def _remember(self, win: Win) -> None:
        wins = self._wins
        wins[win.ad_request_id] = Markup(win.adm, win.nurl)
        if len(wins) > CACHED_WINS:
            wins.popitem(last=False)

    def _note(self, partner: Partner, bid: ValidBid, now: int) -> None:
        """Hold a creative first seen for approval (or approve it, for an auto-approved partner), in the
        background: the auction never waits on the database."""
        crid = bid.bid.crid or ""
        key = (partner.name, crid)
        if key in self._noted:
            return
        if len(self._noted) >= NOTED_LIMIT:
            self._noted.clear()
        self._noted.add(key)
        offer = bid.bid

        def note(conn: sa.Connection) -> CreativeStatus:
            return note_creative(conn, partner, offer.crid, offer.adomain, offer.adm, offer.nurl, now)

        async def run() -> None:
            try:
                await self._write(note)
            except Exception as exc:  # a partner removed meanwhile, a database hiccup: noted again later
                self._noted.discard(key)
                log.warning("could not hold creative %r of %s for approval: %s", crid, partner.name, exc)

        task = asyncio.get_running_loop().create_task(run())
        self._noting.add(task)
        task.add_done_callback(self._noting.discard)

    async def drain(self) -> None:
        """Wait for the notices and creative notes on their way (tests, and a clean stop)."""
        while self._noting:
            await asyncio.gather(*list(self._noting), return_exceptions=True)
        await self.notices.drain()

    async def close(self) -> None:
        await stop_tasks(*self._noting)
        await self.notices.close()
        await self.caller.close()


def _without(checked: list[Checked], out: ValidBid, reason: DropReason) -> list[Checked]:
    """The answers with the bid `out` moved to the drops, for `reason`."""
    return [only_playable(item, lambda bid: reason if bid is out else None) for item in checked]


def _rules(ask: AskResult) -> dict[str, NoticeRule]:
    """Where each partner asked may be sent notices, by name."""
    return {item.asked.terms.name: item.asked.terms.notices for item in ask.checked}
