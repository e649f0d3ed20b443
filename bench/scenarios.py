"""The benchmark's scenarios: which Lua script drives which endpoint, and the target adslot must meet.

Targets are ratios of adslot's throughput to the bare app's on the same machine in the same run (the
speed targets of architecture.md), plus p99 <= 4 x p50 when driven at about half of the measured maximum.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

HALF_LOAD_P99_OVER_P50 = 4.0
PROGRAMMATIC_VENUE_ID = "bench-programmatic"
"""The programmatic scenario's venue: no campaign of its own, the bench bidder its only partner."""


@dataclass(frozen=True)
class Scenario:
    name: str
    script: str
    description: str
    target_ratio: float | None
    half_load: bool = False
    pixels: bool = False
    """Fires pixels: adslot's records are read before and after to count first fires and duplicates."""
    uuid_set: str = "shared"
    """Which list of real ad requests the script uses. Each pixel scenario has its own, so its pixels start
    unfired; the VAST fetches share one (a read can repeat)."""
    requests_per_uuid: int = 0
    """Requests the script makes per uuid of its list, walked in order across runs (so each pixel is fired
    once while the list lasts); 0: it cycles through the shared list instead."""
    args: dict[str, str] = field(default_factory=dict)
    programmatic: bool = False
    """Asks a demand partner: the bench's test bidder runs beside the servers and is the venue's only
    partner (servers.running_bidder, setup_programmatic); its rows carry the bidder's delay and what it was
    asked (report.added_latency_us)."""
    paced: bool = False
    """The paced half-load runs of a pixel scenario (paced_list()), on a list minted just before them."""

    def paced_list(self) -> Scenario:
        """This pixel scenario for its half-load runs: its own list, minted after the max-rate runs, so
        that the paced pixels fire, as a player's do, on ad requests issued moments before, not on the
        far end of the max-rate runs' list (a million ad requests back and more, whose rows neither the
        ledger writer's memory nor PostgreSQL's shared buffers still hold)."""
        return replace(self, uuid_set=f"{self.uuid_set}-paced", paced=True)


SCENARIOS: tuple[Scenario, ...] = (
    Scenario(
        "ad_request_json",
        "ad_request.lua",
        "POST /api/v1/ad/request?format=json (VAST wrapper in the JSON envelope)",
        0.5,
        half_load=True,
        args={"format": "json"},
    ),
    Scenario(
        "programmatic",
        "ad_request.lua",
        "POST /api/v1/ad/request?format=json for a venue whose only demand is a test bidder (an auction)",
        None,
        half_load=True,
        args={"format": "json", "venue": PROGRAMMATIC_VENUE_ID},
        programmatic=True,
    ),
    Scenario(
        "ad_request_xml",
        "ad_request.lua",
        "POST /api/v1/ad/request?format=xml (the VAST wrapper itself)",
        0.5,
        args={"format": "xml"},
    ),
    Scenario("vast", "vast.lua", "GET /api/v1/ad/vast/<uuid> (inline VAST of a real ad request)", 0.6),
    Scenario(
        "impression",
        "impression.lua",
        "GET /api/v1/ad/callback/?ad_request_uuid= (impression pixel)",
        0.7,
        half_load=True,
        pixels=True,
        uuid_set="impression",
        requests_per_uuid=1,
    ),
    Scenario(
        "tracking",
        "tracking.lua",
        "GET /api/v1/ad/tracking/video/?ad_request_uuid=&event= (5 quartile events in turn)",
        0.7,
        pixels=True,
        uuid_set="tracking",
        requests_per_uuid=5,
    ),
    Scenario(
        "mix",
        "mix.lua",
        "1 ad request : 1 inline VAST : 6 pixels, as players send them",
        None,
        args={"format": "json"},
        pixels=True,
        uuid_set="mix",
        requests_per_uuid=8,
    ),
)

BY_NAME = {s.name: s for s in SCENARIOS}


def select(names: list[str] | None) -> list[Scenario]:
    """The named scenarios in their canonical order (ad requests first, the programmatic one beside the
    JSON one, then VAST, pixels, mix)."""
    if not names:
        return list(SCENARIOS)
    unknown = sorted(set(names) - BY_NAME.keys())
    if unknown:
        raise ValueError(f"unknown scenario(s): {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
    return [s for s in SCENARIOS if s.name in names]
