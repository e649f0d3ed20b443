"""The sandbox seed's programmatic demo: the venue `programmatic-lobby` and its only partner, the built-in
demo bidder, made once however often and from however many nodes the seed runs."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import sqlalchemy as sa

from adslot.catalog import current_version
from adslot.demand.repository import get_partner, list_partners
from adslot.environment import prepare_database
from adslot.inventory.repository import get_venue
from adslot.sandbox.seed import DEMO_PARTNER, PROGRAMMATIC_VENUE, seed_programmatic_demo, seed_sandbox
from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine, read_transaction, write_transaction
from adslot.storage.tables import api_keys, demand_partners, venues
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings

T = TypeVar("T")
PUBLIC = "http://sandbox.example.test/sandbox"
VENUE = PROGRAMMATIC_VENUE.venue_id


@pytest.fixture(params=BACKENDS)
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvironmentSettings]:
    """A fresh sandbox database, migrated, not seeded yet."""
    settings, schemas = make_settings(tmp_path, str(request.param), free_port())
    yield settings.environment("sandbox")
    if schemas:
        drop_schemas(schemas)


def seed(env: EnvironmentSettings, public_url: str = PUBLIC) -> None:
    engine = make_engine(env)
    try:
        with write_transaction(engine) as conn:
            seed_sandbox(conn, public_url)
    finally:
        engine.dispose()


def counts(env: EnvironmentSettings) -> tuple[int, int, int]:
    """(programmatic venues, demo partners, keys) in the sandbox."""
    engine = make_engine(env)
    try:
        with read_transaction(engine) as conn:
            return (
                conn.scalar(sa.select(sa.func.count()).where(venues.c.venue_id == VENUE)) or 0,
                conn.scalar(sa.select(sa.func.count()).where(demand_partners.c.name == DEMO_PARTNER)) or 0,
                conn.scalar(sa.select(sa.func.count()).select_from(api_keys)) or 0,
            )
    finally:
        engine.dispose()


def read(env: EnvironmentSettings, fn: Callable[[sa.Connection], T]) -> T:
    engine = make_engine(env)
    try:
        with read_transaction(engine) as conn:
            return fn(conn)
    finally:
        engine.dispose()


def test_the_seed_registers_the_programmatic_lobby_with_type_geo_timezone_and_audience(
    sandbox: EnvironmentSettings,
) -> None:
    prepare_database(sandbox, serving=True)
    venue = read(sandbox, lambda conn: get_venue(conn, VENUE))
    assert venue.venue_type == "70102"
    assert (venue.country, venue.city, venue.timezone) == ("DE", "Berlin", "Europe/Berlin")
    assert venue.latitude is not None and venue.longitude is not None
    assert venue.impressions_per_play == 12.5


def test_the_demo_partner_bids_only_on_the_programmatic_lobby_with_auto_approval_at_its_terms(
    sandbox: EnvironmentSettings,
) -> None:
    prepare_database(sandbox, serving=True)
    seed(sandbox)
    partner = read(sandbox, lambda conn: get_partner(conn, DEMO_PARTNER))
    assert partner.venues == [VENUE]
    assert partner.auto_approve is True
    terms = (partner.timeout_ms, partner.floor_cpm, partner.currency, partner.auction)
    assert terms == (150, 0.5, "USD", "first")
    assert partner.status == "active"
    assert partner.endpoint == f"{PUBLIC}/demo-bidder/openrtb2/auction"
    assert [p.name for p in read(sandbox, list_partners)] == [DEMO_PARTNER], "no partner for other venues"


def test_seeding_again_creates_nothing_and_leaves_the_catalog_version_alone(
    sandbox: EnvironmentSettings,
) -> None:
    restarted = dataclasses.replace(sandbox, public_url=PUBLIC)  # a restart of the same server
    prepare_database(restarted, serving=True)
    seed(sandbox)
    version = read(sandbox, current_version)
    seed(sandbox)
    prepare_database(restarted, serving=True)
    seed(sandbox)
    assert counts(sandbox) == (1, 1, 1)
    assert read(sandbox, current_version) == version


def test_a_new_public_url_moves_the_partners_endpoint_and_keeps_its_other_settings(
    sandbox: EnvironmentSettings,
) -> None:
    prepare_database(sandbox, serving=True)
    seed(sandbox)
    engine = make_engine(sandbox)
    try:
        with write_transaction(engine) as conn:
            conn.execute(sa.update(demand_partners).values(status="paused", timeout_ms=300))
    finally:
        engine.dispose()
    version = read(sandbox, current_version)
    seed(sandbox, "https://ads.example.test/sbx/")
    partner = read(sandbox, lambda conn: get_partner(conn, DEMO_PARTNER))
    assert partner.endpoint == "https://ads.example.test/sbx/demo-bidder/openrtb2/auction"
    assert (partner.status, partner.timeout_ms) == ("paused", 300)
    assert read(sandbox, current_version) > version, "the workers reload the moved endpoint"
    assert counts(sandbox) == (1, 1, 1)


def test_a_command_other_than_serve_leaves_the_demo_partners_endpoint_where_serve_put_it(
    sandbox: EnvironmentSettings,
) -> None:
    prepare_database(sandbox, serving=True)
    served_at = read(sandbox, lambda conn: get_partner(conn, DEMO_PARTNER)).endpoint
    moved = dataclasses.replace(sandbox, public_url="http://elsewhere.example.test:9000/sandbox")
    prepare_database(moved)
    assert read(sandbox, lambda conn: get_partner(conn, DEMO_PARTNER)).endpoint == served_at
    prepare_database(moved, serving=True)
    assert read(sandbox, lambda conn: get_partner(conn, DEMO_PARTNER)).endpoint.startswith(
        "http://elsewhere.example.test:9000/sandbox/demo-bidder/"
    )


@pytest.mark.postgres
def test_two_nodes_starting_at_once_on_postgresql_leave_one_venue_one_partner_and_one_key(
    tmp_path: Path,
) -> None:
    settings, schemas = make_settings(tmp_path, "postgres", free_port())
    env = settings.environment("sandbox")
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def node() -> None:
        try:
            start.wait(timeout=30)
            prepare_database(env, serving=True)
        except BaseException as exc:
            errors.append(exc)

    try:
        threads = [threading.Thread(target=node) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert errors == []
        assert counts(env) == (1, 1, 1)
    finally:
        drop_schemas(schemas)


@pytest.mark.postgres
def test_two_connections_seeding_the_demo_at_once_on_postgresql_leave_one_of_each(tmp_path: Path) -> None:
    """Without the start-up lock too: the create that meets the other's uncommitted row waits, then takes
    the row as made, and its transaction goes on."""
    settings, schemas = make_settings(tmp_path, "postgres", free_port())
    env = settings.environment("sandbox")
    try:
        prepare_database(env)
        engine = make_engine(env)
        with write_transaction(engine) as conn:
            conn.execute(sa.delete(demand_partners))
            conn.execute(sa.delete(venues).where(venues.c.venue_id == VENUE))
        start = threading.Barrier(2)
        wrote: list[bool] = []
        errors: list[BaseException] = []

        def connection() -> None:
            try:
                with write_transaction(engine) as conn:
                    start.wait(timeout=30)
                    wrote.append(seed_programmatic_demo(conn, PUBLIC))
                    time.sleep(0.3)  # hold the rows uncommitted while the other one tries
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=connection) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        engine.dispose()
        assert errors == []
        assert sorted(wrote) == [False, True]
        assert counts(env)[:2] == (1, 1)
    finally:
        drop_schemas(schemas)
