"""A real `adslot serve` with a venue, a screen, short creatives and the screen's player link, set up through
the CLI; and Chromium pages running the reference player on it (tests/player)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import sqlalchemy as sa

from adslot.auth.keys import LIVE_PREFIX
from adslot.auth.repository import create_key
from adslot.campaigns.repository import add_creative, create_advertiser, create_campaign
from adslot.campaigns.schemas import AdvertiserIn, CampaignIn, CreativeIn
from adslot.environment import prepare_database, transact
from adslot.inventory.repository import add_screen, create_venue
from adslot.inventory.schemas import ScreenIn, VenueIn
from adslot.player import links
from adslot.settings import EnvironmentSettings
from adslot.storage.database import make_engine
from tests.conftest import drop_schemas, free_port, make_settings
from tests.playground.test_playground_browser import CHROMIUM, CHROMIUM_ARGS, require_browser
from tests.served import Server

T = TypeVar("T")

VENUE = "lobby"
SCREEN = "screen-1"
BROWSER_ARGS = [*CHROMIUM_ARGS, "--autoplay-policy=no-user-gesture-required"]
WAIT_MS = 30_000


@dataclass
class Screen:
    server: Server
    environ: dict[str, str]
    link: str
    key: str
    admin_key: str
    campaign_id: int
    settings: EnvironmentSettings
    key_id: int

    def player_url(self, **params: object) -> str:
        """The player link with accelerated-time parameters (slot, lead, status seconds; debug)."""
        page, fragment = self.link.split("#", 1)
        query = "&".join(f"{name}={value}" for name, value in params.items())
        return f"{page}?{query}#{fragment}" if query else self.link

    def add_creative(self, name: str, media_url: str, duration: int) -> int:
        creative = CreativeIn(
            name=name,
            media_url=media_url,
            mime_type="video/mp4",
            width=640,
            height=360,
            duration_seconds=duration,
        )
        return self.change(lambda conn: add_creative(conn, self.campaign_id, creative).id)

    def change(self, fn: Callable[[sa.Connection], T]) -> T:
        """A write to the production database, as the API's and CLI's are (the catalog version bumped, so
        the running server reloads it)."""
        engine = make_engine(self.settings)
        try:
            return transact(engine, fn, write=True)
        finally:
            engine.dispose()

    def record(self, uuid: str) -> dict[str, Any]:
        answer = httpx.get(f"{self.server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": self.key})
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()["data"]
        return data


def screen_setup(tmp_path: Path, backend: str, creative_seconds: int = 2, **env: str) -> Iterator[Screen]:
    """A served adslot (not started) whose venue plays one `creative_seconds` video (the sandbox demo file,
    served by adslot itself at /media/demo.mp4, its declared duration shorter than the file)."""
    require_browser()
    port = free_port()
    settings, schemas = make_settings(tmp_path, backend, port)
    environ = dict(os.environ) | {"ADSLOT_DATA_DIR": str(tmp_path), "ADSLOT_PORT": str(port), **env}
    if schemas:
        production = settings.environment("production")
        environ |= {
            "ADSLOT_DATABASE_URL": production.database_url,
            "ADSLOT_DATABASE_SCHEMA": schemas[0],
            "ADSLOT_SANDBOX_DATABASE_SCHEMA": schemas[1],
        }
    # Set up in-process (a CLI call per step costs a second each on a busy machine); the server is real.
    production = settings.environment("production")
    prepare_database(production)
    prepare_database(settings.environment("sandbox"))
    engine = make_engine(production)

    def setup(conn: sa.Connection) -> tuple[links.PlayerLink, str, int]:
        now = int(time.time())
        create_venue(conn, VenueIn(venue_id=VENUE, name="Lobby", timezone="UTC"))
        add_screen(conn, VENUE, ScreenIn(screen_id=SCREEN))
        advertiser = create_advertiser(conn, AdvertiserIn(name="Player Inc"))
        campaign = create_campaign(
            conn,
            CampaignIn(
                advertiser_id=advertiser.id,
                name="player test",
                start_at=now - 60,
                end_at=now + 86400,
                venue_ids=[VENUE],
            ),
        )
        link = links.create_link(
            conn, base_url=production.public_url, prefix=LIVE_PREFIX, venue_id=VENUE, screen_id=SCREEN
        )
        admin_key = create_key(conn, account="ops", prefix=LIVE_PREFIX, scopes="admin")[0]
        return link, admin_key, campaign.id

    link, admin_key, campaign_id = transact(engine, setup, write=True)
    engine.dispose()
    key = link.url.split("#key=", 1)[1].split("&", 1)[0]
    screen = Screen(
        Server(environ, port), environ, link.url, key, admin_key, campaign_id, production, link.key_id
    )
    screen.add_creative("short", "/media/demo.mp4", creative_seconds)
    try:
        yield screen
    finally:
        if screen.server.process and screen.server.process.poll() is None:
            screen.server.kill()
        if schemas:
            drop_schemas(schemas)


@contextmanager
def chromium() -> Iterator[Any]:
    """A Chromium browser (Debian's) that plays muted video without a gesture."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def player_state(page: Any) -> dict[str, Any]:
    state: dict[str, Any] = page.evaluate("() => JSON.parse(JSON.stringify(window.adslotPlayer || {}))")
    return state


def wait_for(page: Any, check: Callable[[dict[str, Any]], bool], timeout: float = 30) -> dict[str, Any]:
    """The player's state once `check` holds for it (polled), or an AssertionError with the last state."""
    deadline = time.monotonic() + timeout
    while True:
        state = player_state(page)
        if check(state):
            return state
        if time.monotonic() > deadline:
            raise AssertionError(f"the player never got there: {json.dumps(state)[:3000]}")
        page.wait_for_timeout(100)


def ads(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [play for play in state.get("plays", []) if play["kind"] == "ad"]
