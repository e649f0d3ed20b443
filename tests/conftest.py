"""Shared fixtures: real servers on loopback, on SQLite and (when configured) PostgreSQL.

PostgreSQL tests need ADSLOT_TEST_POSTGRES_URL (`.ci/run` sets it); without it they skip with that reason,
except under CI=true, where a missing database is a failure, not a skip.
"""

from __future__ import annotations

import inspect
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from argon2 import PasswordHasher

from adslot.api.protocol import AdslotHttpProtocol
from adslot.app import AdslotApp
from adslot.auth.keys import LIVE_PREFIX, TEST_PREFIX
from adslot.auth.repository import create_key
from adslot.campaigns.repository import add_creative, create_advertiser, create_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.catalog import bump_version
from adslot.console import users as console_users
from adslot.environment import prepare_database
from adslot.inventory.repository import create_venue
from adslot.inventory.schemas import VenueIn
from adslot.settings import Settings, load_settings
from adslot.storage.database import make_engine
from tests import fresh_databases

# The suite keeps its bytecode even where PYTHONDONTWRITEBYTECODE is set: otherwise each run compiles every
# module again and pytest rewrites the asserts of every test module again (a third of the fast loop's start).
sys.dont_write_bytecode = False

fresh_databases.install()

PRODUCT_HASHER = console_users.HASHER
"""The console's password hasher as shipped (test_users.py holds its cost to OWASP's minimum)."""
# Tests sign in thousands of times: each hash at the shipped cost (64 MiB, 3 passes, 60 ms or more on a
# loaded machine) would be minutes of the suite spent proving nothing about sign-in. Hashes stay argon2id;
# a stored hash carries its own parameters, so servers started as processes verify these too.
console_users.HASHER = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
console_users.DUMMY_HASH = console_users.HASHER.hash("adslot: not a password of anyone")

POSTGRES_URL = os.environ.get("ADSLOT_TEST_POSTGRES_URL")
SHARED = Path(__file__).resolve().parents[2] / "shared"
if not SHARED.exists():
    SHARED = Path(__file__).resolve().parents[1].parent / "shared"
VAST_DIR = SHARED / "vast"
PROD_VENUE = "venue-1"


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    """Whether `check` comes true within `timeout` seconds: for what another thread or process does soon."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def require_postgres() -> str:
    if not POSTGRES_URL:
        if os.environ.get("CI"):
            pytest.fail("CI must run PostgreSQL tests: set ADSLOT_TEST_POSTGRES_URL")
        pytest.skip(
            "PostgreSQL tests need ADSLOT_TEST_POSTGRES_URL (e.g. postgresql://postgres@127.0.0.1:5432/test)"
        )
    return POSTGRES_URL


def drop_schemas(schemas: list[str]) -> None:
    assert POSTGRES_URL
    engine = sa.create_engine(POSTGRES_URL.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        for schema in schemas:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    engine.dispose()


def make_settings(data_dir: Path, backend: str, port: int, **env: str) -> tuple[Settings, list[str]]:
    environ = {
        "ADSLOT_DATA_DIR": str(data_dir),
        "ADSLOT_PORT": str(port),
        "ADSLOT_CATALOG_POLL_MS": "100",
        # Tests fire a play's events within a second, which the invalid-traffic rules flag (too_fast): the
        # tests of those rules switch them on (tests/ledger/test_ivt.py, tests/api/test_pop_batch.py).
        "ADSLOT_IVT_RULES": "none",
        **env,
    }
    schemas: list[str] = []
    if backend == "postgres":
        url = require_postgres()
        tag = secrets.token_hex(4)
        schemas = [f"t{tag}_production", f"t{tag}_sandbox"]
        environ |= {
            "ADSLOT_DATABASE_URL": url,
            "ADSLOT_DATABASE_SCHEMA": schemas[0],
            "ADSLOT_SANDBOX_DATABASE_SCHEMA": schemas[1],
        }
    return load_settings(environ), schemas


def migrated_engine(data_dir: Path, backend: str) -> Iterator[sa.Engine]:
    """An engine on a migrated production database of `backend`, for a module fixture to yield from; its
    PostgreSQL schemas are dropped afterwards."""
    settings, schemas = make_settings(data_dir, backend, free_port())
    env = settings.environment("production")
    prepare_database(env)
    engine = make_engine(env)
    yield engine
    engine.dispose()
    if schemas:
        drop_schemas(schemas)


@dataclass
class Keys:
    sandbox: str
    production: str
    production_admin: str
    production_admin_only: str
    sandbox_admin_only: str
    sandbox_admin: str
    other_account: str


@dataclass
class LiveServer:
    """adslot under uvicorn in a background thread, on a loopback port."""

    settings: Settings
    seed: int | None = None
    app: AdslotApp | None = None
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None
    keys: Keys | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.settings.environment("production").public_url

    @property
    def sandbox_url(self) -> str:
        return self.settings.environment("sandbox").public_url

    def start(self) -> LiveServer:
        self.app = AdslotApp(self.settings, seed=self.seed)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.settings.port,
            lifespan="on",
            log_level="warning",
            loop="asyncio",
            http=AdslotHttpProtocol,
            access_log=False,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("adslot did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self.server is not None and self.thread is not None:
            self.server.should_exit = True
            self.thread.join(timeout=30)
        self.server = self.thread = None


def add_live_campaign(conn: sa.Connection, advertiser_name: str, name: str, now: int) -> tuple[int, int]:
    """A campaign of a new advertiser, running for a month on PROD_VENUE with a 15 s creative: its ids."""
    advertiser = create_advertiser(conn, AdvertiserIn(name=advertiser_name))
    campaign = create_campaign(
        conn,
        CampaignIn(
            advertiser_id=advertiser.id,
            name=name,
            start_at=now - 3600,
            end_at=now + 30 * 86400,
            venue_ids=[PROD_VENUE],
        ),
    )
    creative = add_creative(
        conn,
        campaign.id,
        CreativeIn(
            name=f"{advertiser_name} 15s",
            media_url=f"https://cdn.example.test/{advertiser_name.lower()}.mp4",
            mime_type="video/mp4",
            width=1920,
            height=1080,
            duration_seconds=15,
            bitrate_kbps=4000,
        ),
    )
    return campaign.id, creative.id


def seed_production(settings: Settings) -> dict[str, Any]:
    """A registered venue with a live campaign, and one venue with nothing to play."""
    env = settings.environment("production")
    prepare_database(env)
    engine = make_engine(env)
    now = int(time.time())
    with engine.begin() as conn:
        create_venue(conn, VenueIn(venue_id=PROD_VENUE, name="Venue one", timezone="Europe/Berlin"))
        create_venue(conn, VenueIn(venue_id="venue-empty", name="No campaigns here"))
        campaign_id, creative_id = add_live_campaign(conn, "Acme", "Acme spring", now)
        bump_version(conn)
    engine.dispose()
    return {"campaign_id": campaign_id, "creative_id": creative_id}


def make_keys(settings: Settings) -> Keys:
    made: dict[str, str] = {}
    for env_name, prefix, specs in (
        (
            "production",
            LIVE_PREFIX,
            {
                "production": ("acct", "ad_request"),
                "production_admin": ("ops", "admin,ad_request"),
                "production_admin_only": ("ops", "admin"),
                "other_account": ("other", "ad_request"),
            },
        ),
        (
            "sandbox",
            TEST_PREFIX,
            {"sandbox_admin_only": ("sbops", "admin"), "sandbox_admin": ("sbops", "admin,ad_request")},
        ),
    ):
        env = settings.environment(env_name)
        sandbox_key = prepare_database(env)
        if sandbox_key:
            made["sandbox"] = sandbox_key
        engine = make_engine(env)
        with engine.begin() as conn:
            for name, (account, scopes) in specs.items():
                made[name] = create_key(conn, account=account, prefix=prefix, scopes=scopes)[0]
            bump_version(conn)
        engine.dispose()
    return Keys(**made)


def start_server(tmp: Path, backend: str, **env: str) -> tuple[LiveServer, list[str]]:
    settings, schemas = make_settings(tmp, backend, free_port(), **env)
    keys = make_keys(settings)
    extra = seed_production(settings)
    server = LiveServer(settings, seed=1234, keys=keys, extra=extra).start()
    return server, schemas


BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def live_server(tmp: Path, backend: str, **env: str) -> Iterator[LiveServer]:
    """start_server's seeded adslot, for a module fixture to yield from: stopped, schemas dropped, after."""
    server, schemas = start_server(tmp, backend, **env)
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.fixture(scope="module")
def live(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One seeded adslot per test module and backend."""
    yield from live_server(tmp_path_factory.mktemp("adslot"), backend)


def cli_databases(backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Point the CLI (which reads ADSLOT_* variables) at fresh databases on `backend`; return the PostgreSQL
    schemas to drop afterwards (none on SQLite)."""
    monkeypatch.setenv("ADSLOT_DATA_DIR", str(tmp_path))
    for name in ("ADSLOT_DATABASE_URL", "ADSLOT_SANDBOX_DATABASE_URL"):
        monkeypatch.delenv(name, raising=False)
    if backend != "postgres":
        return []
    tag = secrets.token_hex(4)
    schemas = [f"cli{tag}_production", f"cli{tag}_sandbox"]
    monkeypatch.setenv("ADSLOT_DATABASE_URL", require_postgres())
    monkeypatch.setenv("ADSLOT_DATABASE_SCHEMA", schemas[0])
    monkeypatch.setenv("ADSLOT_SANDBOX_DATABASE_SCHEMA", schemas[1])
    return schemas


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30, verify=False) as client:  # plain http on loopback: skip loading CA certs
        yield client


def play_time(offset: int = 120) -> int:
    return int(time.time()) + offset


@pytest.fixture(params=BACKENDS)
def served(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """(Server, production key, Settings) for a real `adslot serve` process set up through the CLI."""
    from tests.served import served_setup

    yield from served_setup(str(request.param), tmp_path)


SLOW_FIXTURES = {
    "server": {
        "live",
        "listed",
        "servers",
        "edge",
        "exchange",
        "limited",
        "two_nodes",
        "console_live",
        "advertisers_live",
        "sweeping",
        "sqlite_server",
        "sandbox_server",
        "endpoints",
        "adslot",
        "guarded",
        "loaded",
        "player_origin",
        "callback",
    },
    "browser": {"browser", "chromium_live"},
    "subprocess": {"served", "two_workers", "fleet", "own_redis", "shared", "hostile_setup", "failing"},
    "benchmark": {"recorder"},
}
"""Fixtures that start a server (in-process uvicorn or a loopback HTTP server), a browser or a subprocess,
by the reason a test that uses one, directly or through another fixture, is marked slow."""

SLOW_CALLS = {
    "benchmark": ("run_bench(", "require_wrk(", "running(", "setup_production("),
    "browser": ("sync_playwright",),
    "subprocess": ("subprocess.", "Popen", "served_setup", "multiprocessing", "on_terminal("),
    "server": ("start_server(", "LiveServer(", "live_server(", "on_loopback("),
}
"""What a test's own body calls that starts one of them, by reason."""


def slow_reason(item: pytest.Item) -> str | None:
    """Why `item` is slow (SLOW_FIXTURES, then SLOW_CALLS in its body), or None."""
    used = set(getattr(item, "fixturenames", ()))
    for reason, fixtures in SLOW_FIXTURES.items():
        if used & fixtures:
            return reason
    function = getattr(item, "function", None)
    try:
        body = inspect.getsource(function) if function is not None else ""
    except (OSError, TypeError):
        body = ""
    for reason, calls in SLOW_CALLS.items():
        if any(call in body for call in calls):
            return reason
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark slow, with its reason, every test that starts a server, browser, subprocess or benchmark run:
    through a fixture or in its own body (slow_reason()); a module whose helpers start one, or whose tests
    each compute for seconds (a simulation), carries `pytestmark = pytest.mark.slow(reason)`.
    `-m "not slow"` is the edit-test loop."""
    for item in items:
        if item.get_closest_marker("slow") is None and (reason := slow_reason(item)):
            item.add_marker(pytest.mark.slow(reason))
