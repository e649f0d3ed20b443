"""The player's files as adslot serves them at {base}/player/ in each environment, and the vendored VAST
client's provenance; its config and status calls."""

from __future__ import annotations

import hashlib
import re

import httpx
import pytest
import sqlalchemy as sa

from adslot.player import STATIC, VERSION
from adslot.player.pages import FILES
from adslot.player.status import read_player_states
from adslot.storage.database import make_engine
from tests.conftest import LiveServer

VENDOR = STATIC / "vendor"


def test_the_vendored_vast_client_matches_its_recorded_version_licence_and_checksum() -> None:
    note = (VENDOR / "VERSION").read_text()
    assert note.startswith("@dailymotion/vast-client 6.4.5 (MIT")
    digest = re.search(r"sha256: ([0-9a-f]{64})", note)
    assert digest is not None
    assert hashlib.sha256((VENDOR / "vast-client.min.js").read_bytes()).hexdigest() == digest.group(1)
    assert "Permission is hereby granted" in (VENDOR / "vast-client.LICENSE").read_text()


def test_the_page_the_worker_and_the_package_carry_one_player_version() -> None:
    assert f"const VERSION = '{VERSION}';" in (STATIC / "player.js").read_text()
    assert f"adslot-player-shell-{VERSION}" in (STATIC / "sw.js").read_text()


def test_every_file_the_page_or_worker_loads_is_served() -> None:
    shell = re.search(r"const SHELL = \[(.*?)\];", (STATIC / "sw.js").read_text())
    assert shell is not None
    for name in re.findall(r"'([^']+)'", shell.group(1)):
        assert name.removeprefix("./") in FILES, name


@pytest.mark.parametrize("mount", ["", "/sandbox"])
def test_the_player_is_served_under_each_environment_with_a_script_tight_policy(
    live: LiveServer, http: httpx.Client, mount: str
) -> None:
    root = f"{live.url}{mount}/player"
    moved = http.get(root)
    assert moved.status_code == 301
    assert moved.headers["location"] == f"{mount}/player/"
    page = http.get(root + "/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "media-src *" in policy
    worker = http.get(root + "/sw.js")
    assert worker.status_code == 200 and worker.headers["content-type"].startswith("text/javascript")
    assert worker.headers["cache-control"] == "no-cache"
    assert (
        http.get(root + "/vendor/vast-client.min.js").content == (VENDOR / "vast-client.min.js").read_bytes()
    )
    for missing in ("/nope.js", "/index.html", "/vendor/%2e%2e/sw.js", "/vendor"):
        assert http.get(root + missing).status_code == 404, missing


def test_the_config_names_the_defaults_and_the_house_image_for_a_venue_without_settings(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys is not None
    answer = http.get(
        f"{live.url}/api/v1/player/config",
        params={"venue_id": "venue-1"},
        headers={"Ssp-Key": live.keys.production},
    )
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    assert (data["slot_seconds"], data["lead_seconds"]) == (15, 30)
    assert data["fallback"] == [{"url": f"{live.url}/player/house.svg", "mime_type": "image/svg+xml"}]
    unknown = http.get(
        f"{live.url}/api/v1/player/config",
        params={"venue_id": "nowhere"},
        headers={"Ssp-Key": live.keys.production},
    )
    assert unknown.status_code == 422 and unknown.json()["error"]["field"] == "venue_id"
    assert http.get(f"{live.url}/api/v1/player/config", params={"venue_id": "venue-1"}).status_code == 401


def test_a_status_report_replaces_the_screens_last_one_and_a_bad_field_is_named(
    live: LiveServer, http: httpx.Client
) -> None:
    assert live.keys is not None
    url = f"{live.url}/api/v1/player/status"
    headers = {"Ssp-Key": live.keys.production}
    report = {"venue_id": "venue-1", "screen_id": "s-status", "version": "1.0.0", "fires_queued": 3}
    assert http.post(url, json=report, headers=headers).status_code == 200
    later = {**report, "fires_queued": 0, "cache_bytes": 2048, "errors": 1, "last_error": "media 404"}
    assert http.post(url, json=later, headers=headers).status_code == 200
    engine = make_engine(live.settings.environment("production"))
    with engine.connect() as conn:
        states = [s for s in read_player_states(conn, "venue-1") if s["screen_id"] == "s-status"]
        rows = conn.execute(
            sa.text("SELECT count(*) FROM player_status WHERE screen_id = 's-status'")
        ).scalar()
    engine.dispose()
    assert rows == 1
    assert states[0]["fires_queued"] == 0 and states[0]["cache_bytes"] == 2048
    assert states[0]["last_error"] == "media 404" and states[0]["version"] == "1.0.0"
    bad = http.post(url, json={**report, "fires_queued": -1}, headers=headers)
    assert bad.status_code == 400 and bad.json()["error"]["field"] == "fires_queued"
    assert http.post(url, json=report).status_code == 401
