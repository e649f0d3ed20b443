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
from collections.abc import Callable, Sequence

from adslot.decision.index import Candidate, Choice, DecisionIndex, TierPool
from adslot.decision.model import LiveCampaign
from adslot.decision.slot import Slot

__all__ = ["RETRIES", "Choice", "accept_all", "choose"]

RETRIES = 4
"""Weighted draws tried before filtering the tier. The memoized pools hold only campaigns in flight and in
daypart, so a draw fails only on ``exclude`` or ``accept``; four misses in a row mean those reject much of the
tier, and filtering it once is then cheaper than more luck."""

SHARES_FIT = 1.0 + 1e-9
"""Shares like 0.1 + 0.2 + 0.7 add up to a hair above 1 in floating point; that is not overselling."""

Accept = Callable[[LiveCampaign], bool]


def accept_all(campaign: LiveCampaign) -> bool:
    """The default ``accept``: no caps, pacing, frequency or separation to enforce."""
    return True


def choose(
    index: DecisionIndex,
    slot: Slot,
    rng: random.Random,
    accept: Accept = accept_all,
    exclude: frozenset[int] = frozenset(),
) -> Choice | None:
    """The campaign and creative to play in the slot, or None when nothing eligible is left (a 204).

    Deterministic for a given index, slot, ``accept`` answers and rng state; draws only from ``rng``.
    """
    pools = index.screen_pools(slot.venue, slot.screen_id, slot.screen)
    if not pools.tiers:
        return None
    verdicts: dict[int, bool] = {}
    """What ``accept`` answered in this decision, by campaign id: it is never asked about one twice (an
    oversold share-of-voice walk may pass an accepted campaign that a later draw picks)."""
    for pool in pools.eligible_tiers(slot.play_time, slot.hour_of_week):
        winner = _choose_in_tier(pool, rng, accept, exclude, verdicts)
        if winner is not None:
            choices = winner.choices
            if len(choices) == 1:
                return choices[0]
            cumulative = winner.creative_cumulative
            drawn = bisect_right(cumulative, rng.random() * cumulative[-1])
            return choices[min(drawn, len(choices) - 1)]
    return None


def _ok(candidate: Candidate, accept: Accept, exclude: frozenset[int], verdicts: dict[int, bool]) -> bool:
    """Not excluded, and ``accept`` says yes (asked once per decision at most)."""
    campaign_id = candidate.id
    if campaign_id in exclude:
        return False
    if accept is accept_all:
        return True
    verdict = verdicts.get(campaign_id)
    if verdict is None:
        verdict = verdicts[campaign_id] = accept(candidate.campaign)
    return verdict


def _choose_in_tier(
    pool: TierPool, rng: random.Random, accept: Accept, exclude: frozenset[int], verdicts: dict[int, bool]
) -> Candidate | None:
    sov = pool.sov
    if sov:
        u = rng.random()
        if pool.sov_total <= SHARES_FIT:
            landed = bisect_right(pool.sov_cumulative, u)
            if landed < len(sov) and _ok(sov[landed], accept, exclude, verdicts):
                return sov[landed]
        else:
            walked = _walk_oversold(sov, u, accept, exclude, verdicts)
            if walked is not None:
                return walked
    if pool.weighted:
        drawn = _draw(pool.weighted, pool.weight_cumulative, rng, accept, exclude, verdicts)
        if drawn is not None:
            return drawn
    if sov:
        return _draw(sov, pool.sov_cumulative, rng, accept, exclude, verdicts)
    return None


def _walk_oversold(
    sov: tuple[Candidate, ...], u: float, accept: Accept, exclude: frozenset[int], verdicts: dict[int, bool]
) -> Candidate | None:
    """Segments of eligible campaigns only, in order, until they fill [0, 1): later ones get what is left.

    Where a segment starts depends on whether every campaign before it is eligible, so this asks ``accept``
    about each campaign it walks past; only an oversold tier pays for that.
    """
    start = 0.0
    for candidate in sov:
        if start >= 1.0:
            break
        if not _ok(candidate, accept, exclude, verdicts):
            continue
        if u < start + candidate.share:
            return candidate
        start += candidate.share
    return None


def _draw(
    items: tuple[Candidate, ...],
    cumulative: Sequence[float],
    rng: random.Random,
    accept: Accept,
    exclude: frozenset[int],
    verdicts: dict[int, bool],
) -> Candidate | None:
    """A draw proportional to weight among the items that are not excluded and that ``accept`` takes.

    Rejection sampling first (a bisect per try); then an exponential race over what is left, which visits
    the items in the order of weighted sampling without replacement, so the first accepted one is drawn with
    exactly its share of the accepted weight, and ``accept`` is asked only until it says yes.
    """
    count = len(items)
    if count == 1:
        return items[0] if _ok(items[0], accept, exclude, verdicts) else None
    total = cumulative[-1]
    for _ in range(RETRIES):
        candidate = items[min(bisect_right(cumulative, rng.random() * total), count - 1)]
        if _ok(candidate, accept, exclude, verdicts):
            return candidate
    race: list[tuple[float, int]] = []
    previous = 0.0
    for position, (candidate, running) in enumerate(zip(items, cumulative, strict=True)):
        weight = running - previous
        previous = running
        if weight > 0 and candidate.id not in exclude and verdicts.get(candidate.id) is not False:
            race.append((rng.expovariate(weight), position))
    race.sort()
    for _, position in race:
        if _ok(items[position], accept, exclude, verdicts):
            return items[position]
    return None
