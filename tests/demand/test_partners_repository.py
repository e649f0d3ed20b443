"""Demand partners in storage: stored as given (floor in micros, venues sorted), one per name, changed only
where a patch says, and refused with the API's code and field; migration 0013 adds and drops their table,
0016 moves credentials out of their endpoints."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from pathlib import Path

import aiohttp
import msgspec
import pytest
import sqlalchemy as sa
import yarl
from alembic import command

from adslot.demand.partners import PartnerIn, PartnerPatch, checked_endpoint
from adslot.demand.repository import (
    active_partners,
    create_partner,
    get_partner,
    list_partners,
    remove_partner,
    set_status,
    update_partner,
)
from adslot.errors import ApiError
from adslot.inventory.repository import create_venue
from adslot.inventory.schemas import VenueIn
from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine
from adslot.storage.tables import demand_partners
from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings, migrated_engine
from tests.storage.test_migrations import at_revision

ENDPOINT = "https://bidder.example.test/openrtb"


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.Engine]:
    yield from migrated_engine(tmp_path_factory.mktemp("demand"), str(request.param))


@pytest.fixture
def conn(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A connection whose transaction is rolled back after the test: each test starts with no partner."""
    with engine.connect() as connection:
        transaction = connection.begin()
        for venue_id in ("lobby", "hall"):
            create_venue(connection, VenueIn(venue_id=venue_id, name=venue_id.title()))
        yield connection
        transaction.rollback()


def refusal(conn: sa.Connection, action: Callable[[], object]) -> ApiError:
    """The ApiError `action` raises, in a savepoint: PostgreSQL aborts a transaction a statement failed in."""
    with pytest.raises(ApiError) as refused, conn.begin_nested():
        action()
    return refused.value


def test_a_new_partner_gets_the_defaults_and_reads_back_as_stored(conn: sa.Connection) -> None:
    made = create_partner(conn, PartnerIn(name="dsp-one", endpoint=ENDPOINT))
    assert msgspec.structs.asdict(made) | {"id": 0, "created_at": 0} == {
        "id": 0,
        "name": "dsp-one",
        "endpoint": ENDPOINT,
        "timeout_ms": 150,
        "floor_cpm": 0.0,
        "currency": "USD",
        "auction": "first",
        "max_qps": None,
        "venues": None,
        "auto_approve": False,
        "status": "active",
        "created_at": 0,
        "deals": [],
        "blocked_domains": [],
        "notice_hosts": [],
        "auth_header": None,
    }
    assert get_partner(conn, "dsp-one") == made and list_partners(conn) == [made]


def test_the_floor_is_kept_in_micros_and_the_venues_sorted_once_each(conn: sa.Connection) -> None:
    data = PartnerIn(name="dsp", endpoint=ENDPOINT, floor_cpm=1.234567, venues=["lobby", "hall", "lobby"])
    made = create_partner(conn, data)
    stored = conn.execute(sa.select(demand_partners.c.floor_cpm_micros, demand_partners.c.venues)).one()
    assert tuple(stored) == (1_234_567, '["hall","lobby"]')
    assert made.floor_cpm == 1.234567 and made.venues == ["hall", "lobby"]


def test_a_second_partner_of_the_same_name_is_refused_with_409(conn: sa.Connection) -> None:
    create_partner(conn, PartnerIn(name="dsp", endpoint=ENDPOINT))
    refused = refusal(conn, lambda: create_partner(conn, PartnerIn(name="dsp", endpoint=ENDPOINT + "/2")))
    assert (refused.status, refused.code, refused.field) == (409, "partner_exists", "name")
    assert len(list_partners(conn)) == 1


@pytest.mark.parametrize(
    ("data", "status", "code", "field"),
    [
        (
            PartnerIn(name="p", endpoint=ENDPOINT, venues=["hall", "nowhere"]),
            422,
            "unknown_venue",
            "venues[1]",
        ),
        (PartnerIn(name="p", endpoint=ENDPOINT, currency="XYZ"), 400, "invalid_field", "currency"),
        (PartnerIn(name="p", endpoint=ENDPOINT, floor_cpm=0.0000001), 400, "invalid_field", "floor_cpm"),
        (PartnerIn(name="p", endpoint="ftp://bidder.test/"), 400, "invalid_field", "endpoint"),
    ],
)
def test_what_only_the_repository_can_check_is_refused_with_its_code_and_field(
    conn: sa.Connection, data: PartnerIn, status: int, code: str, field: str
) -> None:
    refused = refusal(conn, lambda: create_partner(conn, data))
    assert (refused.status, refused.code, refused.field) == (status, code, field)
    assert list_partners(conn) == []


def test_a_patch_changes_only_what_it_gives_and_null_clears_venues_and_max_qps(conn: sa.Connection) -> None:
    made = create_partner(conn, PartnerIn(name="dsp", endpoint=ENDPOINT, max_qps=40, venues=["lobby"]))
    floor = update_partner(conn, "dsp", PartnerPatch(floor_cpm=2.5, timeout_ms=300))
    assert msgspec.structs.replace(floor, floor_cpm=0.0, timeout_ms=150) == made
    cleared = update_partner(conn, "dsp", PartnerPatch(venues=None, max_qps=None))
    assert (cleared.venues, cleared.max_qps, cleared.floor_cpm) == (None, None, 2.5)
    refused = refusal(conn, lambda: update_partner(conn, "dsp", PartnerPatch(venues=["gone"])))
    assert (refused.status, refused.code, refused.field) == (422, "unknown_venue", "venues[0]")
    assert update_partner(conn, "dsp", PartnerPatch()) == cleared


def test_pausing_and_resuming_change_the_status_and_list_filters_by_it(conn: sa.Connection) -> None:
    create_partner(conn, PartnerIn(name="b-dsp", endpoint=ENDPOINT))
    create_partner(conn, PartnerIn(name="a-dsp", endpoint=ENDPOINT))
    assert set_status(conn, "b-dsp", "paused").status == "paused"
    assert [p.name for p in list_partners(conn)] == ["a-dsp", "b-dsp"]
    assert [p.name for p in list_partners(conn, status="active")] == ["a-dsp"]
    assert set_status(conn, "b-dsp", "active").status == "active"


def test_removing_a_partner_answers_it_as_it_was_and_frees_its_name(conn: sa.Connection) -> None:
    made = create_partner(conn, PartnerIn(name="dsp", endpoint=ENDPOINT))
    assert remove_partner(conn, "dsp") == made and list_partners(conn) == []
    for action in (
        lambda: get_partner(conn, "dsp"),
        lambda: remove_partner(conn, "dsp"),
        lambda: set_status(conn, "dsp", "paused"),
    ):
        refused = refusal(conn, action)
        assert (refused.status, refused.code, refused.field) == (404, "partner_not_found", "name")
    assert create_partner(conn, PartnerIn(name="dsp", endpoint=ENDPOINT)).name == "dsp"


@pytest.mark.parametrize(
    "url",
    [
        "ftp://bidder.test/",
        "https://",
        "bidder.test/rtb",
        "https://bidder.test:99999/",
        "https://bidder.test:0/",
        "https://[::1/",
        "https://bidder test/",
        "https://bidder.test/\n",
        "https://bidder.test/rtb#part",
    ],
)
def test_an_endpoint_adslot_could_not_post_to_is_refused(url: str) -> None:
    with pytest.raises(ApiError) as refused:
        checked_endpoint(url)
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        400,
        "invalid_field",
        "endpoint",
    )


@pytest.mark.parametrize("url", [ENDPOINT, "http://127.0.0.1:9100", "https://[::1]:8443/bid?src=adslot"])
def test_an_absolute_http_url_with_a_host_is_an_endpoint(url: str) -> None:
    assert checked_endpoint(url) == url


@pytest.fixture(params=BACKENDS)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvironmentSettings]:
    settings, schemas = make_settings(tmp_path, str(request.param), free_port())
    yield settings.environment("production")
    if schemas:
        drop_schemas(schemas)


def test_migration_0013_adds_the_partners_table_with_unique_names_and_its_downgrade_drops_it(
    env: EnvironmentSettings,
) -> None:
    engine = make_engine(env)
    schema = env.database_schema
    try:
        config = at_revision(engine, schema, "0012")
        assert "demand_partners" not in sa.inspect(engine).get_table_names(schema=schema)
        command.upgrade(config, "0013")
        table = demand_partners.to_metadata(sa.MetaData(), schema=schema)
        row = {
            "name": "dsp",
            "endpoint": ENDPOINT,
            "timeout_ms": 150,
            "floor_cpm_micros": 0,
            "currency": "USD",
            "auction": "first",
            "auto_approve": False,
            "status": "active",
            "created_at": 1,
        }
        with engine.begin() as conn:
            conn.execute(sa.insert(table), [row])
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(sa.insert(table), [row | {"endpoint": ENDPOINT + "/2"}])
        command.downgrade(config, "0012")
        assert "demand_partners" not in sa.inspect(engine).get_table_names(schema=schema)
    finally:
        engine.dispose()


def test_migration_0016_moves_credentials_out_of_endpoints_into_the_header_aiohttp_sent(
    env: EnvironmentSettings,
) -> None:
    """A stored endpoint with user info loses it, and its partner gets the very `Authorization: Basic`
    header aiohttp made of that user info: the partner sees the same requests, the console no password."""
    engine = make_engine(env)
    schema = env.database_schema
    old = {
        "creds": "https://us%40er:p%3As%20s@bid.example:8443/rtb?from=a@b",
        "user-only": "http://token@bid.example/rtb",
        "plain": "https://bid.example/rtb?contact=ops@bid.example",
    }
    try:
        config = at_revision(engine, schema, "0015")
        table = sa.table(
            "demand_partners",
            *(sa.column(c) for c in ("name", "endpoint", "timeout_ms", "floor_cpm_micros", "currency")),
            *(sa.column(c) for c in ("auction", "auto_approve", "status", "created_at")),
            schema=schema,
        )
        common = {"timeout_ms": 150, "floor_cpm_micros": 0, "currency": "USD", "auction": "first"}
        with engine.begin() as conn:
            for name, endpoint in old.items():
                conn.execute(
                    sa.insert(table).values(
                        name=name,
                        endpoint=endpoint,
                        auto_approve=False,
                        status="active",
                        created_at=1,
                        **common,
                    )
                )
        command.upgrade(config, "0016")
        with engine.begin() as conn:
            partners = {p.name: p for p in list_partners(conn)}
            _, headers = active_partners(conn)
        assert partners["creds"].endpoint == "https://bid.example:8443/rtb?from=a@b"
        assert partners["user-only"].endpoint == "http://bid.example/rtb"
        assert partners["plain"].endpoint == old["plain"]
        for name in ("creds", "user-only"):
            sent = aiohttp.BasicAuth.from_url(yarl.URL(old[name]))
            assert sent is not None
            assert headers[name] == ("Authorization", sent.encode())
            assert partners[name].auth_header == "Authorization"
        assert "plain" not in headers and partners["plain"].auth_header is None
        assert headers["creds"][1] == "Basic " + base64.b64encode(b"us@er:p:s s").decode()
        command.downgrade(config, "0015")
        columns = {c["name"] for c in sa.inspect(engine).get_columns("demand_partners", schema=schema)}
        assert not columns & {"notice_hosts", "auth_header_name", "auth_header_value"}
    finally:
        engine.dispose()
