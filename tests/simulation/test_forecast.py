"""The forecast runs the real engine over a copy of an environment's inventory and live campaigns, with and
without a proposal: what the proposal would deliver, what it takes from the live campaigns, and nothing
written to the environment's database."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec
import pytest
import sqlalchemy as sa

from adslot.campaigns import repository as campaigns_repo
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version, current_version
from adslot.errors import ApiError
from adslot.inventory import repository as inventory_repo
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.simulation.forecast import (
    CapForecast,
    ExistingCampaign,
    ForecastReport,
    LiveImpact,
    NewCampaign,
    Rival,
    forecast,
)
from adslot.storage.tables import delivery_counters, metadata, venues
from tests.conftest import migrated_engine

START = 1_795_392_000  # 2026-11-23 00:00 UTC, a Monday
DAY = 86_400
SLOTS_PER_SCREEN = 6 * 3600 // 300
"""Six hours of one slot every five minutes."""
MALL_SCREENS = 3


@dataclass(frozen=True)
class Network:
    engine: sa.Engine
    acme: int
    """Advertiser (food) of the live campaign."""
    brand: int
    """Advertiser (auto) of the proposals."""
    live: int
    """Standard, uncapped, every venue."""
    paused: int
    """Standard, paused, the malls only."""


def creative(name: str = "spot") -> dict[str, Any]:
    return {
        "name": name,
        "media_url": f"https://cdn.example.test/{name}.mp4",
        "mime_type": "video/mp4",
        "width": 1920,
        "height": 1080,
        "duration_seconds": 10,
    }


def seed_network(conn: sa.Connection) -> tuple[int, int, int, int]:
    """Two malls (three screens) and a station (one), a live campaign everywhere and a paused one."""
    inventory = [
        ("mall-1", ["mall"], ["s1", "s2"]),
        ("mall-2", ["mall"], ["s1"]),
        ("station", ["transit"], ["s1"]),
    ]
    for venue_id, tags, screen_ids in inventory:
        venue = {"venue_id": venue_id, "name": venue_id, "timezone": "Europe/Berlin", "tags": tags}
        inventory_repo.create_venue(conn, msgspec.convert(venue, VenueIn))
        for screen_id in screen_ids:
            screen = {"screen_id": screen_id, "width": 1920, "height": 1080}
            inventory_repo.add_screen(conn, venue_id, msgspec.convert(screen, ScreenIn))
    acme = campaigns_repo.create_advertiser(conn, AdvertiserIn("Acme", "food")).id
    brand = campaigns_repo.create_advertiser(conn, AdvertiserIn("Brand", "auto")).id
    ids = []
    for name, status, extra in (
        ("Live", "active", {}),
        ("Paused", "paused", {"venue_ids": ["mall-1", "mall-2"]}),
    ):
        body = {
            "advertiser_id": acme,
            "name": name,
            "start_at": START,
            "end_at": START + 7 * DAY,
            "status": status,
        }
        created = campaigns_repo.create_campaign(conn, msgspec.convert(body | extra, CampaignIn))
        campaigns_repo.add_creative(conn, created.id, msgspec.convert(creative(name.lower()), CreativeIn))
        ids.append(created.id)
    bump_version(conn)
    return acme, brand, ids[0], ids[1]


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    for engine in migrated_engine(tmp_path_factory.mktemp("source"), "sqlite"):
        with engine.begin() as conn:
            ids = seed_network(conn)
        yield Network(engine, *ids)


def proposal(network: Network, **rules: Any) -> NewCampaign:
    body = {"advertiser_id": network.brand, "name": "Proposal", "start_at": START, "end_at": START + DAY}
    return NewCampaign(msgspec.convert(body | rules, CampaignIn), [msgspec.convert(creative(), CreativeIn)])


def run(
    network: Network, tmp_path: Path, offer: NewCampaign | ExistingCampaign, **window: Any
) -> ForecastReport:
    with network.engine.connect() as conn:
        return forecast(conn, offer, data_dir=tmp_path, **({"start": START, "hours": 6} | window))


def test_a_higher_tier_proposal_on_the_same_screens_takes_its_plays_from_the_live_campaign(
    network: Network, tmp_path: Path
) -> None:
    offer = proposal(
        network,
        tier="sponsorship",
        targeting={"venue_tags": ["mall"]},
        caps=[{"period": "daily", "metric": "plays", "limit": 100}],
    )
    report = run(network, tmp_path, offer)
    slots = MALL_SCREENS * SLOTS_PER_SCREEN
    assert (report.screens, report.screens_targeted, report.slots_targeted) == (3, 3, slots)
    assert (report.plays, report.impressions, report.fill_share) == (100, 100.0, 100 / slots)
    assert report.caps == [CapForecast("daily", "plays", 100, 100, None, True, days=1, days_reached=1)]
    assert report.lost_to == [Rival(network.live, "Live", "standard", slots - 100)]
    assert report.slots_unfilled == 0
    assert report.conflicts == [
        LiveImpact(network.live, "Live", "standard", slots, slots - 100, -100, float(slots), slots - 100.0)
    ]
    assert report.warnings == [f"Live (campaign {network.live}) loses 100 plays ({100 / slots:.1%})"]
    assert [(d.date, d.slots, d.plays) for d in report.days] == [("2026-11-23", slots, 100)]


def test_a_proposal_whose_targeting_matches_no_venue_plays_nothing_and_says_so(
    network: Network, tmp_path: Path
) -> None:
    """The management API accepts a venue id that is not registered (yet); so does the forecast, and warns."""
    report = run(network, tmp_path, proposal(network, venue_ids=["nowhere"]))
    assert (report.screens, report.slots_targeted, report.plays, report.fill_share) == (0, 0, 0, 0.0)
    assert report.conflicts == [] and report.lost_to == []
    assert report.warnings == ["no venue matches the targeting"]


def test_a_daily_cap_the_supply_cannot_fill_is_reported_unreached_on_each_day(
    network: Network, tmp_path: Path
) -> None:
    offer = proposal(
        network,
        tier="sponsorship",
        end_at=START + 2 * DAY,
        timezone="Europe/Berlin",
        targeting={"venue_tags": ["mall"]},
        caps=[{"period": "daily", "metric": "plays", "limit": 1000}],
    )
    report = run(network, tmp_path, offer, hours=48)
    # Sponsorship outranks everything, so every targeted slot is its own: 864 a day, short of 1,000.
    assert report.plays == report.slots_targeted == 2 * MALL_SCREENS * 24 * 12
    assert report.caps == [
        CapForecast("daily", "plays", 1000, report.plays, None, False, days=3, days_reached=0)
    ], "two UTC days are three Berlin days"
    assert "daily plays cap not reached on 3 of 3 days" in report.warnings


def test_frequency_and_separation_that_bind_are_reported(network: Network, tmp_path: Path) -> None:
    offer = proposal(
        network,
        tier="sponsorship",
        targeting={"venue_tags": ["mall"]},
        frequency={"per_hour": 6},
        separation_minutes=15,
    )
    report = run(network, tmp_path, offer)
    # 15 minutes between its own plays: at most one slot in three, and the hour's 6 plays are never reached.
    assert 0 < report.plays <= report.slots_targeted // 3 + MALL_SCREENS
    assert report.frequency_hours_at_limit == 0
    assert report.slots_within_separation == report.slots_targeted - report.plays
    assert any("within 15 minutes of another auto ad on the same screen" in w for w in report.warnings)

    tight = run(network, tmp_path, proposal(network, tier="sponsorship", frequency={"per_hour": 2}))
    screen_hours = (MALL_SCREENS + 1) * 6
    assert (tight.plays, tight.frequency_hours_at_limit) == (2 * screen_hours, screen_hours)
    assert f"its frequency limit of 2 per hour is reached on {screen_hours} screen-hours" in tight.warnings


@pytest.mark.parametrize(
    ("rules", "status", "code", "field"),
    [
        ({"end_at": START - 1}, 422, "invalid_flight", "end_at"),
        ({"advertiser_id": 999_999}, 422, "unknown_advertiser", "advertiser_id"),
        ({"caps": [{"period": "lifetime", "metric": "spend", "limit": 10.0}]}, 422, "invalid_goal", "cpm"),
        ({"timezone": "Mars/Olympus"}, 422, "invalid_timezone", "timezone"),
        ({"weight": 0}, 400, "invalid_field", "weight"),
        (
            {"caps": [{"period": "daily", "metric": "plays", "limit": 1.5}]},
            400,
            "invalid_field",
            "caps[0].limit",
        ),
    ],
)
def test_an_invalid_proposal_is_refused_as_the_management_api_refuses_it(
    network: Network, tmp_path: Path, rules: dict[str, Any], status: int, code: str, field: str
) -> None:
    body: dict[str, Any] = {
        "advertiser_id": network.brand,
        "name": "Proposal",
        "start_at": START,
        "end_at": START + DAY,
    }
    # Built without msgspec's checks, as Python code may build it: the forecast decodes it as the API would.
    offer = NewCampaign(CampaignIn(**(body | rules)), [msgspec.convert(creative(), CreativeIn)])
    with pytest.raises(ApiError) as refused:
        run(network, tmp_path, offer)
    assert (refused.value.status, refused.value.code, refused.value.field) == (status, code, field)


def test_an_invalid_creative_is_refused_with_its_position(network: Network, tmp_path: Path) -> None:
    offer = proposal(network)
    bad = CreativeIn(**(creative() | {"width": 0}))
    with pytest.raises(ApiError) as refused:
        run(network, tmp_path, NewCampaign(offer.campaign, [offer.creatives[0], bad]))
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        400,
        "invalid_field",
        "creatives[1].width",
    )


@pytest.mark.parametrize(
    ("window", "status", "code", "field"),
    [
        ({"hours": 7 * 24 + 1}, 400, "invalid_field", "hours"),
        ({"hours": 0}, 400, "invalid_field", "hours"),
        ({"slot_seconds": 30}, 400, "invalid_field", "slot_seconds"),
        ({"max_slots": MALL_SCREENS * SLOTS_PER_SCREEN - 1}, 400, "forecast_too_large", "hours"),
    ],
)
def test_a_forecast_beyond_its_bounds_is_refused_naming_the_field(
    network: Network, tmp_path: Path, window: dict[str, Any], status: int, code: str, field: str
) -> None:
    with pytest.raises(ApiError) as refused:
        run(network, tmp_path, proposal(network, targeting={"venue_tags": ["mall"]}), **window)
    assert (refused.value.status, refused.value.code, refused.value.field) == (status, code, field)


def test_an_unknown_campaign_is_not_found(network: Network, tmp_path: Path) -> None:
    with pytest.raises(ApiError) as refused:
        run(network, tmp_path, ExistingCampaign(999_999))
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        404,
        "campaign_not_found",
        "campaign_id",
    )


def test_a_paused_campaign_is_forecast_as_if_it_were_active(network: Network, tmp_path: Path) -> None:
    report = run(network, tmp_path, ExistingCampaign(network.paused))
    assert (report.campaign_id, report.name, report.slots_targeted) == (
        network.paused,
        "Paused",
        MALL_SCREENS * SLOTS_PER_SCREEN,
    )
    # Two standard campaigns of equal weight share the malls' slots: each about half.
    assert report.plays + report.lost_to[0].plays == report.slots_targeted
    assert 0.35 < report.fill_share < 0.65
    assert [(c.campaign_id, c.delta) for c in report.conflicts] == [(network.live, -report.plays)]


def test_the_same_seed_gives_the_same_forecast(network: Network, tmp_path: Path) -> None:
    offer = proposal(network, targeting={"venue_tags": ["mall"]}, weight=300, separation_minutes=10)
    first, again = run(network, tmp_path, offer, seed=3), run(network, tmp_path, offer, seed=3)
    assert 0 < first.plays < first.slots_targeted, "the draws must decide something"
    assert first == again


def table_contents(conn: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
    present = set(sa.inspect(conn).get_table_names())
    return {
        table.name: sorted(conn.execute(sa.select(table)).all(), key=repr)
        for table in metadata.sorted_tables
        if table.name in present
    }


def test_the_environments_database_is_only_read(network: Network, tmp_path: Path) -> None:
    with network.engine.connect() as conn:
        before, version = table_contents(conn), current_version(conn)
    offers = (proposal(network, targeting={"venue_tags": ["mall"]}), ExistingCampaign(network.paused))
    for offer in offers:
        # A connection whose transaction commits: anything the forecast wrote would stay.
        with network.engine.begin() as conn:
            assert forecast(conn, offer, data_dir=tmp_path, start=START, hours=1).plays > 0
    with network.engine.connect() as conn:
        assert table_contents(conn) == before
        assert current_version(conn) == version
    assert list(tmp_path.iterdir()) == [], "the scratch databases are removed"


def test_a_long_flight_is_forecast_over_seven_days_and_its_lifetime_cap_projected(
    network: Network, tmp_path: Path
) -> None:
    offer = proposal(
        network,
        tier="sponsorship",
        end_at=START + 14 * DAY,
        timezone="Europe/Berlin",
        targeting={"venue_tags": ["mall"]},
        caps=[{"period": "lifetime", "metric": "plays", "limit": 700}],
        pacing="even",
    )
    with network.engine.connect() as conn:
        report = forecast(conn, offer, data_dir=tmp_path, now=START - 3600, slot_seconds=3600)
    assert (report.start, report.hours) == (START, 7 * 24)
    assert report.warnings[0] == (
        "the flight runs 336 hours: the forecast covers its first 168 (7 days) and projects its lifetime "
        "caps from them"
    )
    [cap] = report.caps
    assert 325 <= cap.delivered <= 375, "even pacing spends about half the goal in half the flight"
    assert cap.projected == min(700, 2 * cap.delivered)
    assert cap.reached is (cap.projected == 700)
    assert len(report.days) == 8, "seven UTC days touch eight Berlin days"


def test_a_live_campaign_whose_cap_is_already_spent_takes_no_slot(tmp_path: Path) -> None:
    for engine in migrated_engine(tmp_path / "source", "sqlite"):
        with engine.begin() as conn:
            acme, brand, live, _ = seed_network(conn)
            body = {
                "advertiser_id": acme,
                "name": "Spent",
                "tier": "sponsorship",
                "start_at": START,
                "end_at": START + 7 * DAY,
                "caps": [{"period": "lifetime", "metric": "plays", "limit": 50}],
            }
            spent = campaigns_repo.create_campaign(conn, msgspec.convert(body, CampaignIn)).id
            campaigns_repo.add_creative(conn, spent, msgspec.convert(creative("spent"), CreativeIn))
            # What the ledger recorded before: its cap is used up.
            conn.execute(
                sa.insert(delivery_counters).values(
                    key=f"c{spent}:life:plays", cap=50, reserved=5, delivered=45
                )
            )
        network = Network(engine, acme, brand, live, 0)
        report = run(network, tmp_path / "data", proposal(network, targeting={"venue_tags": ["mall"]}))
        assert [r.campaign_id for r in report.lost_to] == [live]
        assert spent not in {c.campaign_id for c in report.conflicts}


def test_a_postgresql_environment_forecasts_as_a_sqlite_one(tmp_path: Path, network: Network) -> None:
    offer = proposal(network, targeting={"venue_tags": ["mall"]}, separation_minutes=10)
    for engine in migrated_engine(tmp_path / "pg", "postgres"):
        with engine.begin() as conn:
            seed_network(conn)
        with engine.connect() as conn:
            on_postgres = forecast(conn, offer, data_dir=tmp_path / "data", start=START, hours=6)
    assert on_postgres == run(network, tmp_path / "data", offer)


def test_live_campaigns_differ_only_where_the_proposal_plays(tmp_path: Path) -> None:
    """A capped campaign ties every screen it plays on into the forecast, but where the proposal cannot play
    the two runs draw alike: a live campaign's delta is only the proposal's doing, not another random draw."""
    for engine in migrated_engine(tmp_path / "source", "sqlite"):
        with engine.begin() as conn:
            acme, brand, live, _ = seed_network(conn)
            # The audience tells where a play was: 1 impression in mall-1, 10 in mall-2, 100 at the station.
            for venue_id, audience in (("mall-2", 10.0), ("station", 100.0)):
                conn.execute(
                    sa.update(venues)
                    .where(venues.c.venue_id == venue_id)
                    .values(impressions_per_play=audience)
                )
            body = {
                "advertiser_id": acme,
                "name": "Capped",
                "start_at": START,
                "end_at": START + 7 * DAY,
                "caps": [{"period": "lifetime", "metric": "plays", "limit": 100_000}],
            }
            capped = campaigns_repo.create_campaign(conn, msgspec.convert(body, CampaignIn)).id
            campaigns_repo.add_creative(conn, capped, msgspec.convert(creative("capped"), CreativeIn))
        network = Network(engine, acme, brand, live, 0)
        offer = proposal(network, tier="sponsorship", venue_ids=["mall-1"])
        report = run(network, tmp_path / "data", offer)
    assert (report.screens, report.plays) == (MALL_SCREENS + 1, 2 * SLOTS_PER_SCREEN)
    assert {c.campaign_id for c in report.conflicts} == {live, capped}
    assert sum(c.delta for c in report.conflicts) == -report.plays
    assert [c.impressions_with - c.impressions_without for c in report.conflicts] == [
        float(c.delta) for c in report.conflicts
    ], "every play lost was lost in mall-1"
