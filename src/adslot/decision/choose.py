"""Pure ad selection: which campaign and creative fill a slot. No I/O; the random source is injected."""

from __future__ import annotations

import random
from dataclasses import dataclass

from adslot.decision.index import Creative, DecisionIndex, LiveCampaign


@dataclass(frozen=True, slots=True)
class Choice:
    campaign: LiveCampaign
    creative: Creative


def eligible(campaign: LiveCampaign, play_time: int) -> bool:
    """A campaign may fill a slot whose play time falls inside its flight."""
    return campaign.start_at <= play_time < campaign.end_at


def choose(index: DecisionIndex, venue_id: str, play_time: int, rng: random.Random) -> Choice | None:
    """Pick uniformly among campaigns eligible at play_time, then uniformly among their creatives."""
    pool = [c for c in index.candidates(venue_id) if eligible(c, play_time)]
    if not pool:
        return None
    campaign = pool[rng.randrange(len(pool))] if len(pool) > 1 else pool[0]
    creatives = campaign.creatives
    creative = creatives[rng.randrange(len(creatives))] if len(creatives) > 1 else creatives[0]
    return Choice(campaign, creative)
