"""What one ad decision costs as the catalog grows: µs per ``choose`` at 10, 1,000 and 10,000 live campaigns.

Run ``.venv/bin/python -m bench.decision`` from the repository root. It builds a synthetic network (2,000
venues in six countries, with types, tags, cities, coordinates and one to three screens each) and catalogs
that mix what media owners sell: venue lists, venue types within a country, tags within a city, regions
and cities, radii, run-of-country, run-of-network house ads, screen-targeted deals, exclusions, dayparts,
three tiers, share of voice, weights, and landscape and portrait creatives. Then, per catalog size:

- **steady state**: every venue's memo is warmed first, as a running server's is after its first requests;
  the same random slots (any venue, any screen, play times within one hour, as players ask for the next
  minutes) are decided ``--number`` at a time, ``--repeats`` times; the figure is the median of the per-call
  means (the minimum is reported too). The ratio 10,000 ÷ 10 is the one to keep at 2 or below.
- **cold first call**: on a fresh index, the first decision for each of ``--cold-venues`` venues, which pays
  for the venue's candidate list, the screen's pools and the hour's eligible subset.

Results are printed and written to ``bench/results/decision.md`` and ``decision.json``.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from adslot.decision.choose import choose
from adslot.decision.dayparts import Daypart, compile_dayparts
from adslot.decision.index import DecisionIndex
from adslot.decision.model import (
    ALL_HOURS,
    Creative,
    GeoRadius,
    LiveCampaign,
    ScreenProfile,
    Targeting,
    Tier,
    VenueProfile,
)
from adslot.decision.slot import Slot, make_slot

RESULTS = Path(__file__).parent / "results"
SIZES = (10, 1_000, 10_000)
TARGET_RATIO = 2.0

BASE_TIME = calendar.timegm((2026, 6, 10, 14, 0, 0))
"""Wednesday 2026-06-10 14:00 UTC: a busy weekday afternoon in Europe, morning in New York."""
DAY = 86_400

VENUE_TYPES = (
    "mall",
    "airport",
    "gym",
    "bar",
    "transit",
    "office",
    "university",
    "supermarket",
    "gas-station",
    "cinema",
    "hospital",
    "hotel",
)
TAGS = tuple(f"tag-{n}" for n in range(30))


@dataclass(frozen=True, slots=True)
class Country:
    code: str
    timezone: str
    regions: tuple[str, ...]
    cities: tuple[tuple[str, float, float], ...]
    """Name, latitude, longitude."""


COUNTRIES = (
    Country(
        "DE",
        "Europe/Berlin",
        ("DE-BE", "DE-BY", "DE-HH"),
        (
            ("Berlin", 52.52, 13.40),
            ("Munich", 48.14, 11.58),
            ("Hamburg", 53.55, 9.99),
            ("Cologne", 50.94, 6.96),
        ),
    ),
    Country(
        "FR",
        "Europe/Paris",
        ("FR-IDF", "FR-ARA", "FR-PAC"),
        (("Paris", 48.86, 2.35), ("Lyon", 45.76, 4.84), ("Marseille", 43.30, 5.37), ("Lille", 50.63, 3.06)),
    ),
    Country(
        "GB",
        "Europe/London",
        ("GB-ENG", "GB-SCT", "GB-WLS"),
        (
            ("London", 51.51, -0.13),
            ("Manchester", 53.48, -2.24),
            ("Glasgow", 55.86, -4.25),
            ("Cardiff", 51.48, -3.18),
        ),
    ),
    Country(
        "US",
        "America/New_York",
        ("US-NY", "US-MA", "US-PA"),
        (
            ("New York", 40.71, -74.01),
            ("Boston", 42.36, -71.06),
            ("Philadelphia", 39.95, -75.17),
            ("Buffalo", 42.89, -78.88),
        ),
    ),
    Country(
        "ES",
        "Europe/Madrid",
        ("ES-MD", "ES-CT", "ES-AN"),
        (
            ("Madrid", 40.42, -3.70),
            ("Barcelona", 41.39, 2.17),
            ("Seville", 37.39, -5.98),
            ("Malaga", 36.72, -4.42),
        ),
    ),
    Country(
        "IT",
        "Europe/Rome",
        ("IT-25", "IT-62", "IT-72"),
        (("Milan", 45.46, 9.19), ("Rome", 41.90, 12.50), ("Naples", 40.85, 14.27), ("Turin", 45.07, 7.69)),
    ),
)

LANDSCAPE = ScreenProfile("", "", width=1920, height=1080, mime_types=frozenset({"video/mp4"}))
PORTRAIT = ScreenProfile("", "", width=1080, height=1920, max_duration_seconds=20)
DAYPARTS = (
    compile_dayparts([Daypart((0, 1, 2, 3, 4), 6, 10)]),
    compile_dayparts([Daypart((0, 1, 2, 3, 4), 17, 23)]),
    compile_dayparts([Daypart((5, 6), 9, 20)]),
    compile_dayparts([Daypart((0, 1, 2, 3, 4, 5, 6), 11, 15)]),
    compile_dayparts([Daypart((4, 5), 20, 3)]),
)


@dataclass(frozen=True, slots=True)
class Network:
    venues: tuple[VenueProfile, ...]
    screens: dict[str, tuple[ScreenProfile, ...]]


def build_network(rng: random.Random, venue_count: int = 2_000) -> Network:
    venues: list[VenueProfile] = []
    screens: dict[str, tuple[ScreenProfile, ...]] = {}
    for n in range(venue_count):
        country = rng.choice(COUNTRIES)
        city, lat, lon = rng.choice(country.cities)
        venue_id = f"venue-{n}"
        venues.append(
            VenueProfile(
                venue_id,
                timezone=country.timezone,
                venue_type=rng.choice(VENUE_TYPES),
                tags=frozenset(rng.sample(TAGS, rng.randint(1, 4))),
                country=country.code,
                region=rng.choice(country.regions),
                city=city,
                latitude=lat + rng.uniform(-0.15, 0.15),
                longitude=lon + rng.uniform(-0.15, 0.15),
            )
        )
        screens[venue_id] = tuple(
            ScreenProfile(
                venue_id,
                f"{venue_id}-s{k}",
                width=kind.width,
                height=kind.height,
                mime_types=kind.mime_types,
                max_duration_seconds=kind.max_duration_seconds,
            )
            for k, kind in enumerate(rng.choices((LANDSCAPE, LANDSCAPE, PORTRAIT), k=rng.randint(1, 3)))
        )
    return Network(tuple(venues), screens)


def build_campaigns(rng: random.Random, count: int, network: Network) -> list[LiveCampaign]:
    """A catalog of ``count`` live campaigns; about 90% are in flight at BASE_TIME, the rest start later.

    The first two are the network's house ads, everywhere and always on, as every network has: without them
    a 10-campaign catalog would leave most slots empty, and an empty answer is cheaper than a choice, which
    would flatter the small catalog in the ratio.
    """
    venue_ids = [v.venue_id for v in network.venues]
    campaigns: list[LiveCampaign] = [
        LiveCampaign(
            id=campaign_id,
            advertiser_id=0,
            name=f"house {campaign_id}",
            start_at=BASE_TIME - 365 * DAY,
            end_at=BASE_TIME + 365 * DAY,
            tier="house",
            creatives=_house_creatives(campaign_id),
        )
        for campaign_id in range(1, min(count, 2) + 1)
    ]
    for campaign_id in range(len(campaigns) + 1, count + 1):
        kind = rng.random()
        tier: Tier = "sponsorship" if rng.random() < 0.05 else "standard"
        country = rng.choice(COUNTRIES)
        targeting: Targeting
        if kind < 0.35:
            targeting = Targeting(venue_ids=frozenset(rng.sample(venue_ids, rng.randint(3, 40))))
        elif kind < 0.60:
            targeting = Targeting(
                venue_types=frozenset(rng.sample(VENUE_TYPES, rng.randint(1, 2))),
                countries=frozenset({country.code}),
            )
        elif kind < 0.70:
            targeting = Targeting(
                venue_tags=frozenset(rng.sample(TAGS, rng.randint(1, 3))),
                cities=frozenset({rng.choice(country.cities)[0]}),
            )
        elif kind < 0.80:
            targeting = Targeting(
                regions=frozenset({rng.choice(country.regions)}),
                cities=frozenset({rng.choice(country.cities)[0]}),
            )
        elif kind < 0.85:
            _, lat, lon = rng.choice(country.cities)
            targeting = Targeting(radii=(GeoRadius(lat, lon, rng.uniform(5, 40)),))
        elif kind < 0.93:
            targeting = Targeting(countries=frozenset({country.code}))
        elif kind < 0.98:
            venue = rng.choice(network.venues)
            screens = network.screens[venue.venue_id]
            targeting = Targeting(
                venue_ids=frozenset({venue.venue_id}),
                screen_ids=frozenset(s.screen_id for s in rng.sample(screens, 1)),
            )
        else:
            targeting = Targeting()
            tier = "house"
        exclusions = Targeting()
        if rng.random() < 0.1:
            exclusions = Targeting(venue_tags=frozenset({rng.choice(TAGS)}))
        hours = rng.choice(DAYPARTS) if rng.random() < 0.3 else ALL_HOURS
        if rng.random() < 0.9:
            start = BASE_TIME - BASE_TIME % DAY - rng.randint(0, 30) * DAY
            end = BASE_TIME - BASE_TIME % DAY + rng.randint(1, 60) * DAY
        else:
            start = BASE_TIME + rng.randint(-20 * DAY, 5 * DAY)
            end = start + rng.randint(DAY, 40 * DAY)
        campaigns.append(
            LiveCampaign(
                id=campaign_id,
                advertiser_id=1 + campaign_id % 97,
                name=f"campaign {campaign_id}",
                start_at=start,
                end_at=end,
                tier=tier,
                weight=rng.randint(1, 1_000),
                targeting=targeting,
                exclusions=exclusions,
                hours_of_week=hours,
                share_of_voice=rng.uniform(0.02, 0.15) if rng.random() < 0.03 else None,
                creatives=_creatives(rng, campaign_id),
            )
        )
    return campaigns


def _creatives(rng: random.Random, campaign_id: int) -> tuple[Creative, ...]:
    made = []
    for n in range(rng.randint(1, 4)):
        width, height = rng.choice(((1920, 1080), (1920, 1080), (3840, 2160), (1080, 1920)))
        made.append(
            Creative(
                id=campaign_id * 10 + n,
                campaign_id=campaign_id,
                name=f"creative {campaign_id}/{n}",
                media_url=f"https://cdn.example.test/{campaign_id}/{n}.mp4",
                mime_type="video/mp4",
                width=width,
                height=height,
                duration_seconds=rng.choice((10, 15, 30)),
                bitrate_kbps=None,
                weight=rng.randint(1, 100),
            )
        )
    return tuple(made)


def _house_creatives(campaign_id: int) -> tuple[Creative, ...]:
    """One per screen shape of the network, so that a house ad fits every screen."""
    return tuple(
        Creative(
            id=campaign_id * 10 + n,
            campaign_id=campaign_id,
            name=f"house {campaign_id} {width}x{height}",
            media_url=f"https://cdn.example.test/house/{campaign_id}/{n}.mp4",
            mime_type="video/mp4",
            width=width,
            height=height,
            duration_seconds=10,
            bitrate_kbps=None,
        )
        for n, (width, height) in enumerate(((1920, 1080), (1080, 1920)))
    )


def make_slots(rng: random.Random, network: Network, count: int, venues: int | None = None) -> list[Slot]:
    """Random slots on the first ``venues`` venues (all by default): any screen or none, within one hour."""
    pool = network.venues[:venues] if venues else network.venues
    slots = []
    for _ in range(count):
        venue = rng.choice(pool)
        screen = rng.choice((None, *network.screens[venue.venue_id]))
        screen_id = None if screen is None else screen.screen_id
        slots.append(make_slot(venue, screen_id, screen, BASE_TIME + rng.randrange(3600)))
    return slots


def per_call_us(index: DecisionIndex, slots: Sequence[Slot], rng: random.Random) -> float:
    """Mean µs per decision over one pass of the slots."""
    started = time.perf_counter()
    for slot in slots:
        choose(index, slot, rng)
    return (time.perf_counter() - started) / len(slots) * 1e6


def steady_state(
    indexes: Sequence[DecisionIndex], slots: Sequence[Slot], repeats: int, seed: int
) -> list[list[float]]:
    """µs per decision for each index, ``repeats`` samples each, after a warming pass.

    The indexes take turns within every round, so that a burst of load from elsewhere on the machine lands on
    all catalog sizes alike instead of on whichever happened to be measured then.
    """
    rngs = [random.Random(seed) for _ in indexes]
    for index, rng in zip(indexes, rngs, strict=True):
        per_call_us(index, slots, rng)
    samples: list[list[float]] = [[] for _ in indexes]
    for _ in range(repeats):
        for index, rng, mine in zip(indexes, rngs, samples, strict=True):
            mine.append(per_call_us(index, slots, rng))
    return samples


def fill_rate(index: DecisionIndex, slots: Sequence[Slot]) -> float:
    rng = random.Random(0)
    return sum(choose(index, slot, rng) is not None for slot in slots) / len(slots)


def cold_first_calls(campaigns: Sequence[LiveCampaign], slots: Sequence[Slot], venues: int) -> float:
    """Median µs of the first decision for each of ``venues`` venues on a fresh index."""
    index = DecisionIndex.build(campaigns)
    rng = random.Random(1)
    seen: set[str] = set()
    samples: list[float] = []
    for slot in slots:
        if slot.venue.venue_id in seen:
            continue
        seen.add(slot.venue.venue_id)
        started = time.perf_counter()
        choose(index, slot, rng)
        samples.append((time.perf_counter() - started) * 1e6)
        if len(samples) == venues:
            break
    return statistics.median(samples)


def candidates_per_venue(index: DecisionIndex, network: Network) -> float:
    return statistics.mean(len(index.candidates(v)) for v in network.venues[:200])


def make_slot_us(slots: Sequence[Slot], repeats: int = 5) -> float:
    inputs = [(s.venue, s.screen_id, s.screen, s.play_time) for s in slots]
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        for venue, screen_id, screen, play_time in inputs:
            make_slot(venue, screen_id, screen, play_time)
        best = min(best, (time.perf_counter() - started) / len(inputs) * 1e6)
    return best


@dataclass(frozen=True, slots=True)
class SizeResult:
    campaigns: int
    us_per_decision_median: float
    us_per_decision_min: float
    fill_rate: float
    cold_first_call_us_median: float
    candidates_per_venue_mean: float
    index_build_ms: float


@dataclass(frozen=True, slots=True)
class Report:
    command: str
    when: str
    commit: str
    cpus: int | None
    python: str
    platform: str
    load_average: tuple[float, float, float]
    venues: int
    screens: int
    slots: int
    repeats: int
    make_slot_us: float
    sizes: tuple[SizeResult, ...]
    ratio_largest_over_smallest: float
    target_ratio: float
    target_met: bool


def run(repeats: int, number: int, cold_venues: int, seed: int) -> Report:
    network = build_network(random.Random(seed))
    slots = make_slots(random.Random(seed + 1), network, number)
    cold_slots = make_slots(random.Random(seed + 2), network, cold_venues * 4)
    catalogs = [build_campaigns(random.Random(seed + size), size, network) for size in SIZES]
    indexes: list[DecisionIndex] = []
    build_ms: list[float] = []
    for campaigns in catalogs:
        started = time.perf_counter()
        indexes.append(DecisionIndex.build(campaigns))
        build_ms.append((time.perf_counter() - started) * 1e3)
    samples = steady_state(indexes, slots, repeats, seed)
    sizes: list[SizeResult] = []
    for size, campaigns, index, mine, built in zip(SIZES, catalogs, indexes, samples, build_ms, strict=True):
        median, best = statistics.median(mine), min(mine)
        sizes.append(
            SizeResult(
                campaigns=size,
                us_per_decision_median=round(median, 3),
                us_per_decision_min=round(best, 3),
                fill_rate=round(fill_rate(index, slots), 3),
                cold_first_call_us_median=round(cold_first_calls(campaigns, cold_slots, cold_venues), 1),
                candidates_per_venue_mean=round(candidates_per_venue(index, network), 1),
                index_build_ms=round(built, 1),
            )
        )
        print(f"  {size:>6} campaigns: {median:7.2f} µs/decision (min {best:.2f})", file=sys.stderr)
    ratio = sizes[-1].us_per_decision_median / sizes[0].us_per_decision_median
    return Report(
        command=" ".join(["python -m bench.decision", *sys.argv[1:]]),
        when=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        commit=_commit(),
        cpus=os.cpu_count(),
        python=platform.python_version(),
        platform=platform.platform(),
        load_average=os.getloadavg(),
        venues=len(network.venues),
        screens=sum(len(s) for s in network.screens.values()),
        slots=len(slots),
        repeats=repeats,
        make_slot_us=round(make_slot_us(slots), 3),
        sizes=tuple(sizes),
        ratio_largest_over_smallest=round(ratio, 3),
        target_ratio=TARGET_RATIO,
        target_met=ratio <= TARGET_RATIO,
    )


def markdown(report: Report) -> str:
    lines = [
        "# Decision cost against catalog size",
        "",
        f"`{report.command}` on {report.when}, commit `{report.commit}`.",
        f"{report.cpus} CPUs, Python {report.python}, {report.platform}; "
        f"load average {', '.join(f'{x:.2f}' for x in report.load_average)} at the end.",
        f"{report.venues:,} venues, {report.screens:,} screens; {report.slots:,} random slots (any venue, "
        f"any screen or none, play times within one hour), {report.repeats} timed passes after a warm-up, "
        "the sizes taking turns in every round.",
        "",
        "| live campaigns | µs per decision (median) | min | fill rate | candidates per venue "
        "| cold first call per venue, µs | index build, ms |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in report.sizes:
        lines.append(
            f"| {row.campaigns:,} | {row.us_per_decision_median:.2f} | {row.us_per_decision_min:.2f} "
            f"| {row.fill_rate:.0%} | {row.candidates_per_venue_mean:,.0f} "
            f"| {row.cold_first_call_us_median:,.0f} | {row.index_build_ms:,.1f} |"
        )
    met = "met" if report.target_met else "NOT met"
    lines += [
        "",
        f"Ratio {SIZES[-1]:,} ÷ {SIZES[0]}: **{report.ratio_largest_over_smallest:.2f}** "
        f"(target ≤ {report.target_ratio}: {met}). `make_slot` (the time zone conversion) costs "
        f"{report.make_slot_us:.2f} µs per slot, not included above.",
        "",
        "Steady state: every venue's memo is warm, as in a running server after its first requests for a "
        "venue. The cold column is the first decision for a venue on a fresh index (candidate list, screen "
        "pools and the hour's eligible subset), paid once per venue and kind of screen, then once per hour "
        "of the week and flight change. `accept` is the default (accept everything): the caller's caps and "
        "pacing checks are not part of these figures.",
        "",
    ]
    return "\n".join(lines)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.decision", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--repeats", type=int, default=21, help="timed passes per catalog size (default 21)")
    parser.add_argument("--number", type=int, default=5_000, help="slots per pass (default 5000)")
    parser.add_argument("--cold-venues", type=int, default=300, help="venues timed cold (default 300)")
    parser.add_argument("--seed", type=int, default=20260610)
    parser.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    args = parser.parse_args(argv)
    result = run(args.repeats, args.number, args.cold_venues, args.seed)
    report = markdown(result)
    print(report)
    if not args.no_write:
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "decision.md").write_text(report, encoding="utf-8")
        (RESULTS / "decision.json").write_text(json.dumps(asdict(result), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
