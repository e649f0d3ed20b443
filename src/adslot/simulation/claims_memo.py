"""Claim plans and cache answers remembered across one forecast run's slot decisions.

A run's decisions ask about the same campaigns again and again: within a minute every screen draws from the
same tiers, and a campaign its caps or pacing refuse is drawn, planned and refused on screen after screen.
These two keep what plan_claims and the DeliveryCache answered for as long as it holds, and give the same
answers (tests/simulation/test_claims_memo.py holds them to plan_claims and DeliveryCache).

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from datetime import date

from adslot.decision.model import LiveCampaign
from adslot.decision.slot import Slot
from adslot.ledger.budget import DeliveryCache, Snapshot, stage
from adslot.ledger.claims import Claim, Claims, Spacing, campaign_clock, plan_claims

PlanKey = tuple[int, float, str, int, date | None, str | None, str | None]
"""(campaign id, audience, its local date, its local hour of the week, and for a campaign with frequency or
separation: the venue's local date, venue id, screen id)."""


class Planner:
    """plan_claims, remembered for one run, whose campaigns do not change. Within a UTC hour, a plan depends
    only on the campaign's local date and hour of the week (its caps and pacing), on the audience, and, for
    a campaign with frequency or separation, on the place and the venue's local date; a separation's Spacing
    also names the play time, so that one is made anew from the remembered plan. A campaign refused by the
    cache is planned again for every slot it is drawn for, which made planning a third of a forecast's CPU.

    Equal claims are handed out as one object (a campaign's cap and pacing claims are the same on every
    screen), so the cache's answer about one serves them all. Play times only move forward, so the plans of
    hours gone by are dropped (`forget_before`): kept, they grew with every place and hour of the run."""

    def __init__(self) -> None:
        self._plans: dict[int, dict[PlanKey, Claims]] = {}
        """By UTC hour (epoch seconds)."""
        self._claims: dict[int, dict[Claim, Claim]] = {}
        """By UTC hour: each distinct claim planned in it."""

    def __call__(self, campaign: LiveCampaign, slot: Slot, impressions: float) -> Claims:
        play_time = slot.play_time
        hour = play_time - play_time % 3600
        plans = self._plans.get(hour)
        if plans is None:
            plans = self._plans[hour] = {}
        day, hour_of_week = campaign_clock(campaign.timezone, play_time)
        if campaign.frequency is None and campaign.separation_minutes <= 0:
            key: PlanKey = (campaign.id, impressions, day, hour_of_week, None, None, None)
        else:
            venue_id = slot.venue.venue_id
            key = (campaign.id, impressions, day, hour_of_week, slot.local_date, venue_id, slot.screen_id)
        known = plans.get(key)
        if known is None:
            made = plan_claims(campaign, slot, impressions)
            if made.counts:
                claims = self._claims.setdefault(hour, {})
                made = Claims(tuple(claims.setdefault(c, c) for c in made.counts), made.spacings)
            known = plans[key] = made
        spacings = known.spacings
        if not spacings or spacings[0].play_time == play_time:
            return known
        if len(spacings) == 1:  # a campaign has one category: one spacing
            spacing = spacings[0]
            return Claims(known.counts, (Spacing(spacing.key, play_time, spacing.gap_seconds),))
        return Claims(known.counts, tuple(Spacing(s.key, play_time, s.gap_seconds) for s in spacings))

    def forget_before(self, play_time: int) -> None:
        """Drop the plans of the UTC hours before play_time's."""
        hour = play_time - play_time % 3600
        for memo in (self._plans, self._claims):
            for old in [h for h in memo if h < hour]:
                del memo[old]


class TrustedCache(DeliveryCache):
    """The DeliveryCache of a run that trusts its counters for ever (Drive.cache_seconds infinite), which
    remembers its answer about each claim until a counter the claim reads changes: every screen's decision
    asks about the same campaigns' same claims (the planner hands out one object per distinct claim), most of
    them refused again and again, and stage() over them was a fifth of a forecast.

    Its answers are DeliveryCache.accepts': yes when it knows none of the counters claimed, else whether
    budget.stage admits the claims on the counters it knows. A count claim reads only its own counter (and
    its pacing total) as it was before the ad request, never another claim's staged one, so the claims fit
    together exactly when each fits alone. A separation is judged afresh: it depends on the play time, and
    costs a lookup."""

    def __init__(self, clock: Callable[[], float], max_keys: int = 50_000) -> None:
        super().__init__(max_keys=max_keys, ttl_seconds=math.inf, clock=clock)
        self._judged: dict[int, tuple[Claim, bool, bool]] = {}
        """By id of a claim: (the claim, whether it fits the counters known, whether it reads one known)."""
        self._readers: dict[str, set[int]] = {}
        """By counter key: the ids in _judged whose answer read it."""

    def accepts(self, claims: Claims, play_time: int) -> bool:
        judged = self._judged
        fits, known = True, False
        for claim in claims.counts:
            answer = judged.get(id(claim))
            if answer is None or answer[0] is not claim:
                answer = self._judge(claim)
            fits = fits and answer[1]
            known = known or answer[2]
        entries = self._entries
        for spacing in claims.spacings:  # as budget.stage judges it, on the counter known
            entry = entries.get(spacing.key)
            if entry is not None:
                known = True
                mark = entry[1]
                if mark.last_at is not None and play_time < mark.last_at + max(
                    mark.cap or 0, spacing.gap_seconds
                ):
                    fits = False
        return fits or not known

    def _judge(self, claim: Claim) -> tuple[Claim, bool, bool]:
        """Whether the claim fits the counters known, and whether it reads one; remembered until one of the
        counters it reads changes."""
        keys = (claim.key,) if claim.pace is None else (claim.key, claim.pace.total_key)
        entries = self._entries
        known = {key: entries[key][1] for key in keys if key in entries}
        # A count claim's verdict does not depend on the play time (only a spacing's does).
        answer = (claim, not isinstance(stage(Claims((claim,)), 0, known), str), bool(known))
        self._judged[id(claim)] = answer
        readers = self._readers
        for key in keys:
            readers.setdefault(key, set()).add(id(claim))
        return answer

    def forget(self) -> None:
        """Drop every remembered answer (the plans they were for are gone)."""
        self._judged.clear()
        self._readers.clear()

    def update(self, counters: Mapping[str, Snapshot]) -> None:
        entries, judged, readers = self._entries, self._judged, self._readers
        learnt = 0
        for key, snapshot in counters.items():
            entry = entries.get(key)
            if entry is None:
                learnt += 1
            elif entry[1].snapshot() == snapshot:
                continue
            for ident in readers.pop(key, ()):
                judged.pop(ident, None)
        if learnt and len(entries) + learnt > self._max_keys:
            # Learning these forgets the oldest counters, which answers may have read.
            judged.clear()
            readers.clear()
        super().update(counters)
