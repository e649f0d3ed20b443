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
from typing import Any

import httpx

from tests.conftest import drop_schemas, free_port, make_settings
from tests.playground.test_playground_browser import CHROMIUM, CHROMIUM_ARGS, require_browser
from tests.served import Server, cli

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

    def player_url(self, **params: object) -> str:
        """The player link with accelerated-time parameters (slot, lead, status seconds; debug)."""
        page, fragment = self.link.split("#", 1)
        query = "&".join(f"{name}={value}" for name, value in params.items())
        return f"{page}?{query}#{fragment}" if query else self.link

    def add_creative(self, name: str, media_url: str, duration: int) -> int:
        made = cli(
            self.environ,
            "campaigns",
            "add-creative",
            "--campaign-id",
            str(self.campaign_id),
            "--name",
            name,
            "--media-url",
            media_url,
            "--mime-type",
            "video/mp4",
            "--width",
            "640",
            "--height",
            "360",
            "--duration-seconds",
            str(duration),
        )
        return int(json.loads(made)["id"])

    def record(self, uuid: str) -> dict[str, Any]:
        answer = httpx.get(f"{self.server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": self.key})
        assert answer.status_code == 200, answer.text
        data: dict[str, Any] = answer.json()["data"]
        return data


def screen_setup(tmp_path: Path, backend: str, creative_seconds: int = 2, **env: str) -> Iterator[Screen]:
    """A served adslot whose venue plays one `creative_seconds` video (the sandbox demo file, served by
    adslot itself at /media/demo.mp4, its declared duration shorter than the file)."""
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
    now = int(time.time())
    cli(environ, "venues", "add", "--venue-id", VENUE, "--name", "Lobby", "--timezone", "UTC")
    cli(environ, "venues", "add-screen", "--venue-id", VENUE, "--screen-id", SCREEN)
    advertiser = json.loads(cli(environ, "campaigns", "add-advertiser", "--name", "Player Inc"))
    campaign = json.loads(
        cli(
            environ,
            "campaigns",
            "add",
            "--advertiser-id",
            str(advertiser["id"]),
            "--name",
            "player test",
            "--start-at",
            str(now - 60),
            "--end-at",
            str(now + 86400),
            "--venue",
            VENUE,
        )
    )
    link = cli(environ, "screens", "player-link", "--venue-id", VENUE, "--screen-id", SCREEN).strip()
    key = link.split("#key=", 1)[1].split("&", 1)[0]
    admin_key = cli(environ, "keys", "create", "--account", "ops", "--scope", "admin").strip()
    screen = Screen(Server(environ, port), environ, link, key, admin_key, int(campaign["id"]))
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
