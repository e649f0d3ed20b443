"""The catalog: what is stored compiles into the decision model exactly, in a fixed number of queries."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import sqlalchemy as sa

from adslot.campaigns.repository import (
    add_creative,
    create_advertiser,
    create_campaign,
    update_campaign,
    update_creative,
)
from adslot.campaigns.schemas import (
    AdvertiserIn,
    CampaignIn,
    CampaignPatch,
    CreativeIn,
    CreativePatch,
)
from adslot.catalog import load_catalog
from adslot.decision.model import (
    ALL_HOURS,
    Cap,
    Creative,
    FrequencyCap,
    GeoRadius,
    LiveCampaign,
    ScreenProfile,
    Targeting,
    VenueProfile,
)
from adslot.environment import prepare_database
from adslot.inventory.repository import add_screen, create_venue
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.sandbox.seed import DEMO_MEDIA_FILE
from adslot.storage.database import make_engine
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings

NOW = int(time.time())
FLIGHT = {"start_at": NOW - 60, "end_at": NOW + 86400}


@pytest.fixture(params=BACKENDS)
def engines(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, sa.Engine]]:
    """Migrated production and sandbox databases (the sandbox seeded) on the backend under test."""
    settings, schemas = make_settings(tmp_path, str(request.param), free_port())
    made = {}
    for name in ("production", "sandbox"):
        env = settings.environment(name)
        prepare_database(env)
        made[name] = make_engine(env)
    yield made
    for engine in made.values():
        engine.dispose()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture
def engine(engines: dict[str, sa.Engine]) -> sa.Engine:
    return engines["production"]


def creative_in(name: str, **extra: Any) -> CreativeIn:
    return CreativeIn(
        name=name,
        media_url=f"https://cdn.example.test/{name}.mp4",
        mime_type="video/mp4",
        width=1920,
        height=1080,
        duration_seconds=15,
        **extra,
    )


RULES: dict[str, Any] = {
    "tier": "sponsorship",
    "weight": 250,
    "timezone": "Europe/Berlin",
    "targeting": {
        "venue_ids": ["v1"],
        "venue_types": ["1.1"],
        "venue_tags": ["premium"],
        "geo": {
            "countries": ["de"],
            "regions": ["BE"],
            "cities": ["Berlin"],
            "radius": [{"latitude": 52.5, "longitude": 13.4, "radius_km": 25}],
        },
        "screen_ids": ["s1"],
    },
    "exclusions": {"venue_ids": ["v2"], "venue_tags": ["kids"], "geo": {"countries": ["AT"]}},
    "dayparts": [
        {"days": ["mon", "fri"], "start_hour": 7, "end_hour": 10},
        {"days": ["sun"], "start_hour": 22, "end_hour": 2},
    ],
    "caps": [
        {"period": "lifetime", "metric": "plays", "limit": 100000},
        {"period": "daily", "metric": "impressions", "limit": 2500},
        {"period": "lifetime", "metric": "spend", "limit": 1234.567891},
    ],
    "cpm": 7.25,
    "pacing": "even",
    "frequency": {"per_hour": 2},
    "separation_minutes": 30,
    "share_of_voice": 0.25,
}


def hours(day: int, first: int, count: int) -> int:
    return sum(1 << ((day * 24 + first + i) % 168) for i in range(count))


def test_a_campaign_compiles_every_rule_into_the_decision_model(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        advertiser = create_advertiser(conn, AdvertiserIn(name="Shoes", category="footwear"))
        body = {"advertiser_id": advertiser.id, "name": "Rules", **FLIGHT, **RULES}
        campaign = create_campaign(conn, msgspec.convert(body, CampaignIn))
        kept = add_creative(conn, campaign.id, creative_in("kept", weight=7, size_bytes=99, sha256="a" * 64))
        paused = add_creative(conn, campaign.id, creative_in("paused"))
        update_creative(conn, campaign.id, paused.id, CreativePatch(status="paused"))
        catalog = load_catalog(conn)
    expected_creative = Creative(
        id=kept.id,
        campaign_id=campaign.id,
        name="kept",
        media_url="https://cdn.example.test/kept.mp4",
        mime_type="video/mp4",
        width=1920,
        height=1080,
        duration_seconds=15,
        bitrate_kbps=None,
        weight=7,
        size_bytes=99,
        sha256="a" * 64,
    )
    assert catalog.index.campaigns[campaign.id] == LiveCampaign(
        id=campaign.id,
        advertiser_id=advertiser.id,
        name="Rules",
        start_at=FLIGHT["start_at"],
        end_at=FLIGHT["end_at"],
        tier="sponsorship",
        weight=250,
        timezone="Europe/Berlin",
        category="footwear",
        targeting=Targeting(
            venue_ids=frozenset({"v1"}),
            venue_types=frozenset({"1.1"}),
            venue_tags=frozenset({"premium"}),
            countries=frozenset({"DE"}),
            regions=frozenset({"BE"}),
            cities=frozenset({"Berlin"}),
            radii=(GeoRadius(52.5, 13.4, 25.0),),
            screen_ids=frozenset({"s1"}),
        ),
        exclusions=Targeting(
            venue_ids=frozenset({"v2"}), venue_tags=frozenset({"kids"}), countries=frozenset({"AT"})
        ),
        hours_of_week=hours(0, 7, 3) | hours(4, 7, 3) | hours(6, 22, 4),
        caps=(
            Cap("lifetime", "plays", 100_000),
            Cap("daily", "impressions", 2_500_000),
            Cap("lifetime", "spend", 1_234_567_891),
        ),
        cpm_micros=7_250_000,
        pacing="even",
        frequency=FrequencyCap(per_hour=2, per_day=None),
        separation_minutes=30,
        share_of_voice=0.25,
        creatives=(expected_creative,),
    )
    assert catalog.creatives[paused.id].name == "paused", "a paused creative still renders issued requests"


def test_a_plain_campaign_compiles_to_the_unrestricted_defaults(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        advertiser = create_advertiser(conn, AdvertiserIn(name="Plain"))
        campaign = create_campaign(conn, CampaignIn(advertiser_id=advertiser.id, name="Plain", **FLIGHT))
        add_creative(conn, campaign.id, creative_in("plain"))
        live = load_catalog(conn).index.campaigns[campaign.id]
    assert (live.targeting, live.exclusions, live.hours_of_week) == (Targeting(), Targeting(), ALL_HOURS)
    assert (live.tier, live.weight, live.caps, live.cpm_micros, live.frequency) == (
        "standard",
        100,
        (),
        None,
        None,
    )
    assert (live.category, live.pacing, live.separation_minutes, live.share_of_voice) == (
        None,
        "asap",
        0,
        None,
    )


def test_only_active_campaigns_that_can_run_somewhere_with_a_creative_are_compiled(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        advertiser = create_advertiser(conn, AdvertiserIn(name="Many"))
        ids = {}
        for name, venue_ids in (("everywhere", None), ("nowhere", []), ("paused", None), ("bare", None)):
            made = create_campaign(
                conn, CampaignIn(advertiser_id=advertiser.id, name=name, venue_ids=venue_ids, **FLIGHT)
            )
            ids[name] = made.id
            if name != "bare":
                add_creative(conn, made.id, creative_in(name))
        update_campaign(conn, ids["paused"], CampaignPatch(status="paused"))
        catalog = load_catalog(conn)
    assert set(catalog.index.campaigns) == {ids["everywhere"]}
    assert catalog.index.campaigns[ids["everywhere"]].targeting.venue_ids == frozenset()


def test_all_venues_ignores_the_venue_list_it_keeps_for_later(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        advertiser = create_advertiser(conn, AdvertiserIn(name="Toggle"))
        made = create_campaign(
            conn, CampaignIn(advertiser_id=advertiser.id, name="t", venue_ids=["a", "b"], **FLIGHT)
        )
        add_creative(conn, made.id, creative_in("t"))
        assert load_catalog(conn).index.campaigns[made.id].targeting.venue_ids == {"a", "b"}
        update_campaign(conn, made.id, CampaignPatch(all_venues=True))
        assert load_catalog(conn).index.campaigns[made.id].targeting.venue_ids == frozenset()
        update_campaign(conn, made.id, CampaignPatch(all_venues=False))
        assert load_catalog(conn).index.campaigns[made.id].targeting.venue_ids == {"a", "b"}


def test_venues_and_screens_compile_into_profiles(engine: sa.Engine) -> None:
    hourly = [float(h % 24) for h in range(168)]
    with engine.begin() as conn:
        create_venue(
            conn,
            VenueIn(
                venue_id="mall",
                name="Mall",
                timezone="Europe/Berlin",
                latitude=52.5,
                longitude=13.4,
                venue_type="2.1",
                tags=["premium", "indoor"],
                country="de",
                region="BE",
                city="Berlin",
                impressions_per_play=4.5,
                hourly_impressions=hourly,
            ),
        )
        create_venue(conn, VenueIn(venue_id="kiosk", name="Kiosk"))
        add_screen(
            conn,
            "mall",
            ScreenIn(
                screen_id="s1",
                width=1080,
                height=1920,
                orientation="portrait",
                mime_types=["video/mp4", "video/webm"],
                max_duration_seconds=20,
            ),
        )
        add_screen(conn, "kiosk", ScreenIn(screen_id="k1"))
        catalog = load_catalog(conn)
    assert "mall" in catalog.venues and "nowhere" not in catalog.venues
    assert catalog.venues["mall"] == VenueProfile(
        venue_id="mall",
        timezone="Europe/Berlin",
        venue_type="2.1",
        tags=frozenset({"premium", "indoor"}),
        country="DE",
        region="BE",
        city="Berlin",
        latitude=52.5,
        longitude=13.4,
        impressions_per_play=4.5,
        hourly_impressions=tuple(hourly),
    )
    assert catalog.venues["kiosk"] == VenueProfile(venue_id="kiosk")
    assert catalog.screens == {
        ("mall", "s1"): ScreenProfile(
            venue_id="mall",
            screen_id="s1",
            width=1080,
            height=1920,
            orientation="portrait",
            mime_types=frozenset({"video/mp4", "video/webm"}),
            max_duration_seconds=20,
        ),
        ("kiosk", "k1"): ScreenProfile(venue_id="kiosk", screen_id="k1"),
    }


def fill(conn: sa.Connection, prefix: str, count: int) -> None:
    """count venues with a screen each, and count campaigns with two creatives each, one per venue."""
    advertiser = create_advertiser(conn, AdvertiserIn(name=prefix, category="c"))
    for i in range(count):
        venue_id = f"{prefix}-{i}"
        create_venue(conn, VenueIn(venue_id=venue_id, name=venue_id, tags=["t"]))
        add_screen(conn, venue_id, ScreenIn(screen_id="s", mime_types=["video/mp4"]))
        campaign = create_campaign(
            conn,
            CampaignIn(
                advertiser_id=advertiser.id,
                name=venue_id,
                venue_ids=[venue_id],
                dayparts=[],
                separation_minutes=5,
                **FLIGHT,
            ),
        )
        add_creative(conn, campaign.id, creative_in(f"{venue_id}-a"))
        add_creative(conn, campaign.id, creative_in(f"{venue_id}-b"))


def queries_to_load(engine: sa.Engine) -> tuple[int, int]:
    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(str(args[2]))

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        with engine.connect() as conn:
            catalog = load_catalog(conn)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    return len(statements), len(catalog.index.campaigns)


def test_loading_takes_the_same_few_queries_for_2_or_60_campaigns_and_venues(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        fill(conn, "few", 2)
    few, compiled = queries_to_load(engine)
    assert compiled == 2
    with engine.begin() as conn:
        fill(conn, "many", 58)
    many, compiled = queries_to_load(engine)
    assert compiled == 60
    assert few == many <= 10  # one query per table the snapshot holds, demand partners and creatives too


def test_the_sandbox_demo_campaign_is_house_tier_with_its_videos_size_and_checksum(
    engines: dict[str, sa.Engine],
) -> None:
    media = DEMO_MEDIA_FILE.read_bytes()
    with engines["sandbox"].connect() as conn:
        (demo,) = load_catalog(conn).index.campaigns.values()
    assert demo.tier == "house" and demo.targeting == Targeting()
    (creative,) = demo.creatives
    assert (creative.media_url, creative.size_bytes, creative.sha256) == (
        "/media/demo.mp4",
        len(media),
        hashlib.sha256(media).hexdigest(),
    )
