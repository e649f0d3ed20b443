"""A seeded, realistic network for the simulator: venues, screens, advertisers and campaigns.

Everything is created through the same repository functions and wire schemas as the management API, so the
simulation exercises the validation and catalog compilation that production uses.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import msgspec
import sqlalchemy as sa

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.inventory import repository as inventory_repo
from adslot.inventory.schemas import ScreenIn, VenueIn

CITIES = (
    ("DE", "BE", "Berlin", "Europe/Berlin", 52.52, 13.40),
    ("DE", "HH", "Hamburg", "Europe/Berlin", 53.55, 9.99),
    ("GB", "ENG", "London", "Europe/London", 51.51, -0.13),
    ("US", "NY", "New York", "America/New_York", 40.71, -74.01),
    ("US", "MA", "Boston", "America/New_York", 42.36, -71.06),
)
VENUE_TYPES = ("1.1", "1.2", "2.3", "3.1", "6.4")  # OpenOOH taxonomy ids: transit, retail, ... (illustrative)
TAGS = ("mall", "airport", "premium", "street", "office")
CATEGORIES = ("auto", "telco", "food", "retail", "finance")


@dataclass(frozen=True, slots=True)
class Network:
    venues: list[str]
    screens: list[tuple[str, str]]
    campaign_ids: list[int]


def _landscape(name: str, seconds: int) -> dict[str, Any]:
    return {
        "name": name,
        "media_url": f"https://cdn.example.test/{name}.mp4",
        "mime_type": "video/mp4",
        "width": 1920,
        "height": 1080,
        "duration_seconds": seconds,
        "size_bytes": 1_000_000 + seconds * 250_000,
        "sha256": f"{abs(hash(name)) % (1 << 64):064x}",
    }


def _portrait(name: str, seconds: int) -> dict[str, Any]:
    return _landscape(name, seconds) | {"width": 1080, "height": 1920}


def build_network(
    conn: sa.Connection, *, screens: int, campaigns: int, start: int, hours: int, slot_seconds: int, seed: int
) -> Network:
    """Create `screens` screens (5 per venue) and `campaigns` campaigns whose goals fit the supply."""
    rng = random.Random(seed)
    venue_ids: list[str] = []
    screen_keys: list[tuple[str, str]] = []
    venue_count = max(1, screens // 5)
    for v in range(venue_count):
        country, region, city, tz, lat, lon = CITIES[v % len(CITIES)]
        venue_id = f"v{v:04d}"
        venue = {
            "venue_id": venue_id,
            "name": f"{city} venue {v}",
            "timezone": tz,
            "latitude": round(lat + rng.uniform(-0.05, 0.05), 5),
            "longitude": round(lon + rng.uniform(-0.05, 0.05), 5),
            "venue_type": VENUE_TYPES[v % len(VENUE_TYPES)],
            "tags": sorted(rng.sample(TAGS, 2)),
            "country": country,
            "region": region,
            "city": city,
            "impressions_per_play": round(rng.uniform(2, 30), 1),
        }
        inventory_repo.create_venue(conn, msgspec.convert(venue, VenueIn))
        venue_ids.append(venue_id)
        for s in range(5):
            if len(screen_keys) >= screens:
                break
            portrait = s == 4
            screen = {
                "screen_id": f"s{s}",
                "width": 1080 if portrait else 1920,
                "height": 1920 if portrait else 1080,
                "mime_types": ["video/mp4"],
                "max_duration_seconds": 30,
            }
            inventory_repo.add_screen(conn, venue_id, msgspec.convert(screen, ScreenIn))
            screen_keys.append((venue_id, f"s{s}"))

    advertisers = [
        campaigns_repo.create_advertiser(
            conn, msgspec.convert({"name": f"Advertiser {i}", "category": CATEGORIES[i % 5]}, AdvertiserIn)
        ).id
        for i in range(max(5, campaigns))
    ]
    end = start + hours * 3600
    slots_per_screen = hours * 3600 // slot_seconds
    supply = len(screen_keys) * slots_per_screen
    ids: list[int] = []
    for i in range(campaigns):
        spec = _campaign_spec(i, rng, supply)
        spec |= {"advertiser_id": advertisers[i], "name": f"Campaign {i}", "start_at": start, "end_at": end}
        created = campaigns_repo.create_campaign(conn, msgspec.convert(spec, CampaignIn))
        for k, seconds in enumerate((10, 15)):
            creative = _landscape(f"c{i}-{k}", seconds)
            campaigns_repo.add_creative(conn, created.id, msgspec.convert(creative, CreativeIn))
        campaigns_repo.add_creative(conn, created.id, msgspec.convert(_portrait(f"c{i}-p", 15), CreativeIn))
        ids.append(created.id)
    return Network(venue_ids, screen_keys, ids)


def _campaign_spec(i: int, rng: random.Random, supply: int) -> dict[str, Any]:
    """Twenty kinds of campaign, cycling: sponsorships, paced standard buys with every goal kind, house."""
    kind = i % 20
    weekday_daytime = [{"days": ["mon", "tue", "wed", "thu", "fri"], "start_hour": 7, "end_hour": 22}]
    evenings = [{"days": ["mon", "tue", "wed", "thu", "fri", "sat", "sun"], "start_hour": 17, "end_hour": 2}]
    if kind == 0:
        return {
            "tier": "sponsorship",
            "share_of_voice": 0.15,
            "targeting": {"venue_tags": ["premium"]},
            "caps": [{"period": "lifetime", "metric": "plays", "limit": max(1, supply // 60)}],
            "pacing": "even",
        }
    if kind == 1:
        return {
            "tier": "sponsorship",
            "weight": 50,
            "targeting": {"geo": {"cities": ["Berlin"]}},
            "dayparts": evenings,
            "caps": [{"period": "daily", "metric": "plays", "limit": max(1, supply // 400)}],
            "frequency": {"per_hour": 2},
        }
    if kind >= 17:
        return {"tier": "house", "weight": 100 + 50 * kind}
    standard: list[dict[str, Any]] = [
        {
            "targeting": {"venue_types": ["1.1", "1.2"]},
            "caps": [{"period": "lifetime", "metric": "impressions", "limit": max(1, supply // 30 * 12)}],
            "pacing": "even",
        },
        {
            "targeting": {"geo": {"countries": ["US"]}},
            "cpm": 8.5,
            "caps": [
                {
                    "period": "lifetime",
                    "metric": "spend",
                    "limit": max(0.01, round(supply / 120 * 16 * 8.5 / 1000, 2)),
                }
            ],
            "pacing": "even",
            "separation_minutes": 10,
        },
        {
            "targeting": {"geo": {"radius": [{"latitude": 52.52, "longitude": 13.40, "radius_km": 25}]}},
            "caps": [{"period": "lifetime", "metric": "plays", "limit": max(1, supply // 150)}],
            "pacing": "even",
            "dayparts": weekday_daytime,
        },
        {
            "targeting": {"venue_tags": ["mall", "office"]},
            "exclusions": {"geo": {"countries": ["GB"]}},
            "caps": [{"period": "daily", "metric": "plays", "limit": max(1, supply // 200)}],
            "pacing": "even",
            "frequency": {"per_hour": 3, "per_day": 30},
        },
        {
            "caps": [{"period": "daily", "metric": "plays", "limit": max(1, supply // 300)}],
            "pacing": "asap",
            "separation_minutes": 15,
        },
    ]
    spec = dict(standard[(kind - 2) % len(standard)])
    spec["weight"] = rng.choice((50, 100, 200))
    return spec
