"""The forecast's runs on the ledger's rules in memory give the answer the SQLite ledger gives: the same
report for proposals that meet every rule the ledger enforces (caps, even pacing, frequency, separation,
tiers), and the same plays and counters from the simulator's loop, fires included."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import sqlalchemy as sa

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version, load_catalog
from adslot.inventory import repository as inventory_repo
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.simulation.forecast import ForecastReport, NewCampaign, forecast
from adslot.simulation.memory_ledger import MemoryLedger, Play
from adslot.simulation.run import Drive, Place, drive, drive_in_memory
from adslot.storage.tables import ad_requests, delivery_counters
from tests.conftest import migrated_engine

pytestmark = pytest.mark.slow("compute")  # simulations of hours to days of slots: seconds of CPU each

START = 1_795_392_000  # 2026-11-23 00:00 UTC, a Monday
DAY = 86_400


def creative(name: str, duration: int = 10) -> CreativeIn:
    body = {
        "name": name,
        "media_url": f"https://cdn.example.test/{name}.mp4",
        "mime_type": "video/mp4",
        "width": 1920,
        "height": 1080,
        "duration_seconds": duration,
    }
    return msgspec.convert(body, CreativeIn)


LIVE: list[tuple[str, str, dict[str, Any]]] = [
    ("Everywhere", "food", {}),
    ("Daily capped", "food", {"caps": [{"period": "daily", "metric": "plays", "limit": 150}]}),
    (
        "Paced",
        "drink",
        {
            "caps": [{"period": "lifetime", "metric": "impressions", "limit": 900}],
            "pacing": "even",
            "targeting": {"venue_tags": ["mall"]},
        },
    ),
    ("Frequent", "drink", {"frequency": {"per_hour": 2}, "weight": 300}),
    ("Spaced", "auto", {"separation_minutes": 20, "weight": 200}),
    (
        "Sponsor",
        "food",
        {
            "tier": "sponsorship",
            "venue_ids": ["v1"],
            "caps": [{"period": "daily", "metric": "plays", "limit": 40}],
        },
    ),
    ("House", "food", {"tier": "house"}),
]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[sa.Engine, int]]:
    """Six venues (malls and stations, two time zones, two screens each) and live campaigns under every kind
    of limit the ledger enforces."""
    for engine in migrated_engine(tmp_path_factory.mktemp("source"), "sqlite"):
        with engine.begin() as conn:
            for v in range(6):
                venue = {
                    "venue_id": f"v{v}",
                    "name": f"Venue {v}",
                    "timezone": "Europe/Berlin" if v % 3 else "America/New_York",
                    "tags": ["mall" if v % 2 else "transit"],
                }
                inventory_repo.create_venue(conn, msgspec.convert(venue, VenueIn))
                for s in range(2):
                    screen = {"screen_id": f"s{s}", "width": 1920, "height": 1080}
                    inventory_repo.add_screen(conn, f"v{v}", msgspec.convert(screen, ScreenIn))
            advertisers = {
                category: campaigns_repo.create_advertiser(conn, AdvertiserIn(category.title(), category)).id
                for category in ("food", "drink", "auto")
            }
            for name, category, rules in LIVE:
                body = {
                    "advertiser_id": advertisers[category],
                    "name": name,
                    "start_at": START,
                    "end_at": START + 5 * DAY,
                } | rules
                made = campaigns_repo.create_campaign(conn, msgspec.convert(body, CampaignIn))
                campaigns_repo.add_creative(conn, made.id, creative(name.lower().replace(" ", "-")))
            bump_version(conn)
        yield engine, advertisers["auto"]


PROPOSALS: dict[str, dict[str, Any]] = {
    "standard with a daily cap": {"caps": [{"period": "daily", "metric": "plays", "limit": 120}]},
    "sponsorship, evenly paced over its flight": {
        "tier": "sponsorship",
        "pacing": "even",
        "caps": [{"period": "lifetime", "metric": "plays", "limit": 500}],
    },
    "frequency and separation in the spaced campaign's category": {
        "frequency": {"per_hour": 3},
        "separation_minutes": 10,
        "targeting": {"venue_tags": ["mall"]},
        "weight": 400,
    },
}


@pytest.mark.parametrize("rules", PROPOSALS.values(), ids=PROPOSALS.keys())
def test_the_forecast_in_memory_gives_the_sqlite_ledgers_report(
    source: tuple[sa.Engine, int], tmp_path: Path, rules: dict[str, Any]
) -> None:
    engine, advertiser = source
    body = {"advertiser_id": advertiser, "name": "Proposal", "start_at": START, "end_at": START + 3 * DAY}
    offer = NewCampaign(msgspec.convert(body | rules, CampaignIn), [creative("spot")])
    reports: list[ForecastReport] = []
    for on_ledger in (True, False):
        with engine.connect() as conn:
            reports.append(
                forecast(conn, offer, data_dir=tmp_path, start=START, hours=24, on_ledger=on_ledger)
            )
    on_sqlite, in_memory = reports
    assert in_memory.plays > 0 and in_memory.conflicts, "the proposal plays and takes plays from others"
    assert in_memory == on_sqlite


def test_over_three_days_the_forecast_in_memory_still_gives_the_sqlite_ledgers_report(
    source: tuple[sa.Engine, int], tmp_path: Path
) -> None:
    """Three days of every screen's slots (20,736 decisions in the two runs): daily caps reached and reset,
    pacing hours sized from what earlier days delivered, frequency and separation counters by the thousand,
    the remembered plans and cache answers dropped and made again quarter hour after quarter hour."""
    engine, advertiser = source
    rules = PROPOSALS["frequency and separation in the spaced campaign's category"] | {
        "caps": [{"period": "daily", "metric": "plays", "limit": 90}],
        "targeting": {},
    }
    body = {"advertiser_id": advertiser, "name": "Proposal", "start_at": START, "end_at": START + 3 * DAY}
    offer = NewCampaign(msgspec.convert(body | rules, CampaignIn), [creative("spot")])
    reports: list[ForecastReport] = []
    for on_ledger in (True, False):
        with engine.connect() as conn:
            reports.append(
                forecast(conn, offer, data_dir=tmp_path, start=START, hours=72, on_ledger=on_ledger)
            )
    on_sqlite, in_memory = reports
    assert in_memory.screens == 12 and in_memory.slots_targeted == 12 * 72 * 12
    assert in_memory.plays > 0 and in_memory.conflicts and in_memory.frequency_hours_at_limit
    assert in_memory == on_sqlite


def test_the_loop_in_memory_gives_the_sqlite_ledgers_plays_and_counters_with_late_and_repeated_fires(
    source: tuple[sa.Engine, int], tmp_path: Path
) -> None:
    """Late PoPs (kept, not counted) and repeats go through the fires' own rules in both."""
    engine, _ = source
    path = tmp_path / "ledger.sqlite3"
    with engine.connect() as conn:
        catalog = load_catalog(conn)
        counters = [
            (str(r.key), (r.cap, r.reserved, r.delivered, r.last_at))
            for r in conn.execute(sa.select(delivery_counters))
        ]
    shutil.copyfile(str(engine.url.database), path)
    places: list[Place] = sorted(catalog.screens)
    config = Drive(START, 12, 300, pop_late=0.2, pop_repeat=0.3, cache_seconds=60, sweep=False)
    asyncio.run(drive(path, catalog, places, config))
    ledger = MemoryLedger(counters)
    delivery = drive_in_memory(ledger, catalog, places, config)

    stored = sa.create_engine(f"sqlite:///{path}")
    a = ad_requests.c
    with stored.connect() as conn:
        on_sqlite = sorted(
            Play(v, s, int(t), c, float(i))
            for v, s, t, c, i in conn.execute(
                sa.select(a.venue_id, a.screen_id, a.play_time, a.campaign_id, a.impressions).where(
                    a.impression_at.is_not(None)
                )
            )
        )
        counted = {
            str(r.key): (r.cap, r.reserved, r.delivered, r.last_at)
            for r in conn.execute(sa.select(delivery_counters))
        }
    stored.dispose()
    in_memory = sorted(ledger.plays())
    assert 0 < len(in_memory) < delivery.fills, "some PoPs came too late to count"
    assert in_memory == on_sqlite
    assert ledger.counters == counted
