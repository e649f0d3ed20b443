"""Pure ad selection: which campaign and creative fill a slot. No I/O; the random source is injected.

Rules, in order:

1. Tiers strictly by priority (``TIERS``): a lower tier fills the slot only when no campaign of a higher one
   is eligible, because sponsorships are sold as "every play you can get" and house ads are what is left.
2. Eligible: in flight at play_time (``start_at <= play_time < end_at``), its daypart mask holds the slot's
   hour of week, the venue and screen targeting allow it, one of its creatives fits the screen, its id is not
   in ``exclude``, and ``accept`` (the caller's caps, pacing, frequency and separation) says yes.
3. Within a tier, share of voice first: ``u`` in [0, 1) is drawn and the eligible share-of-voice campaigns
   take consecutive segments of [0, 1) as long as their shares (the sum capped at 1); the one ``u`` lands in
   wins. Otherwise the campaigns without share of voice are drawn proportionally to weight; when none of those
   is eligible, the share-of-voice campaigns split the slot in proportion to their shares.
4. The creative is drawn among the campaign's fitting creatives proportionally to creative weight.

``accept`` is the costly check, so it is asked last, only about a campaign that the draw picked (or, in an
oversold tier, that the walk passes), and at most once per campaign per decision. When the tier's shares add
up to at most 1, a share-of-voice campaign keeps a fixed segment of [0, 1) (one bisect), which gives each
eligible campaign exactly its share, the same distribution as walking only the eligible ones; an oversold tier
(shares above 1) walks them, so that the cap at 1 applies to eligible campaigns only.
"""

from __future__ import annotations

import random
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass

from adslot.decision.index import Candidate, DecisionIndex, TierPool, weighted_pick
from adslot.decision.model import Creative, LiveCampaign
from adslot.decision.slot import Slot

RETRIES = 4
"""Weighted draws tried before filtering the tier. The memoized pools hold only campaigns in flight and in
daypart, so a draw fails only on ``exclude`` or ``accept``; four misses in a row mean those reject much of the
tier, and filtering it once is then cheaper than more luck."""

SHARES_FIT = 1.0 + 1e-9
"""Shares like 0.1 + 0.2 + 0.7 add up to a hair above 1 in floating point; that is not overselling."""


@dataclass(frozen=True, slots=True)
class Choice:
    campaign: LiveCampaign
    creative: Creative


def accept_all(campaign: LiveCampaign) -> bool:
    """The default ``accept``: no caps, pacing, frequency or separation to enforce."""
    return True


def choose(
    index: DecisionIndex,
    slot: Slot,
    rng: random.Random,
    accept: Callable[[LiveCampaign], bool] = accept_all,
    exclude: frozenset[int] = frozenset(),
) -> Choice | None:
    """The campaign and creative to play in the slot, or None when nothing eligible is left (a 204).

    Deterministic for a given index, slot, ``accept`` answers and rng state; draws only from ``rng``.
    """
    pools = index.screen_pools(slot.venue, slot.screen_id, slot.screen)
    if not pools.tiers:
        return None
    judge = _Judge(accept, exclude)
    for pool in pools.eligible_tiers(slot.play_time, slot.hour_of_week):
        winner = _choose_in_tier(pool, rng, judge)
        if winner is not None:
            return Choice(winner.campaign, _pick_creative(winner, rng))
    return None


class _Judge:
    """The per-decision checks left once flight and daypart are settled: ``exclude``, then ``accept`` once."""

    __slots__ = ("accept", "exclude", "rejected")

    def __init__(self, accept: Callable[[LiveCampaign], bool], exclude: frozenset[int]) -> None:
        self.accept = accept
        self.exclude = exclude
        self.rejected: set[int] = set()

    def may(self, candidate: Candidate) -> bool:
        """Not yet ruled out, without asking ``accept``."""
        return candidate.id not in self.exclude and candidate.id not in self.rejected

    def ok(self, candidate: Candidate) -> bool:
        if not self.may(candidate):
            return False
        if self.accept(candidate.campaign):
            return True
        self.rejected.add(candidate.id)
        return False


def _choose_in_tier(pool: TierPool, rng: random.Random, judge: _Judge) -> Candidate | None:
    if pool.sov:
        u = rng.random()
        if pool.sov_total <= SHARES_FIT:
            landed = bisect_right(pool.sov_cumulative, u)
            if landed < len(pool.sov) and judge.ok(pool.sov[landed]):
                return pool.sov[landed]
        else:
            walked = _walk_oversold(pool.sov, u, judge)
            if walked is not None:
                return walked
    if pool.weighted:
        drawn = _draw(pool.weighted, pool.weight_cumulative, rng, judge)
        if drawn is not None:
            return drawn
    if pool.sov:
        return _draw(pool.sov, pool.sov_cumulative, rng, judge)
    return None


def _walk_oversold(sov: tuple[Candidate, ...], u: float, judge: _Judge) -> Candidate | None:
    """Segments of eligible campaigns only, in order, until they fill [0, 1): later ones get what is left.

    Where a segment starts depends on whether every campaign before it is eligible, so this asks ``accept``
    about each campaign it walks past; only an oversold tier pays for that.
    """
    start = 0.0
    for candidate in sov:
        if start >= 1.0:
            break
        if not judge.ok(candidate):
            continue
        if u < start + candidate.share:
            return candidate
        start += candidate.share
    return None


def _draw(
    items: tuple[Candidate, ...], cumulative: tuple[float, ...], rng: random.Random, judge: _Judge
) -> Candidate | None:
    """A draw proportional to weight among the items ``judge`` accepts, None when it accepts none.

    Rejection sampling first (a bisect per try); then an exponential race over what is left, which visits
    the items in the order of weighted sampling without replacement, so the first accepted one is drawn with
    exactly its share of the accepted weight, and ``accept`` is asked only until it says yes.
    """
    if len(items) == 1:
        return items[0] if judge.ok(items[0]) else None
    for _ in range(RETRIES):
        candidate = items[weighted_pick(cumulative, rng.random())]
        if judge.ok(candidate):
            return candidate
    race: list[tuple[float, int]] = []
    previous = 0.0
    for position, (candidate, total) in enumerate(zip(items, cumulative, strict=True)):
        weight = total - previous
        previous = total
        if weight > 0 and judge.may(candidate):
            race.append((rng.expovariate(weight), position))
    race.sort()
    for _, position in race:
        if judge.ok(items[position]):
            return items[position]
    return None


def _pick_creative(candidate: Candidate, rng: random.Random) -> Creative:
    if len(candidate.creatives) == 1:
        return candidate.creatives[0]
    return candidate.creatives[weighted_pick(candidate.creative_cumulative, rng.random())]
