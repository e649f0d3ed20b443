"""A screen's player in the console: an admin makes its player link (a key that may only ask for ads), sees
the screen on air with the player's last report, and stops it; a stopped screen's key is refused."""

from __future__ import annotations

import html
import re

import httpx

from tests.conftest import LiveServer
from tests.console.conftest import csrf_of, signed_in

SCREEN = "/console/production/venues/v/venue-1"


def _add_screen(admin: httpx.Client, screen_id: str) -> None:
    page = admin.get(SCREEN)
    added = admin.post(SCREEN + "/screens", data={"csrf_token": csrf_of(page.text), "screen_id": screen_id})
    assert added.status_code == 303, added.text


def _row(page: str, screen_id: str) -> str:
    found = re.search(rf"<tr><td><a [^>]*>{screen_id}</a>.*?</tr>", page, re.S)
    assert found, page
    return found.group(0)


def test_an_admin_makes_a_player_link_sees_the_screen_on_air_and_stops_it(console_live: LiveServer) -> None:
    admin = signed_in(console_live, "admin")
    _add_screen(admin, "player-screen")
    page = admin.get(SCREEN)
    assert "Player link for player-screen" in page.text
    made = admin.post(SCREEN + "/screens/player-screen/player-link", data={"csrf_token": csrf_of(page.text)})
    assert made.status_code == 200, made.text
    link = html.unescape(re.search(r'id="player-link">([^<]+)<', made.text).group(1))  # type: ignore[union-attr]
    assert link.startswith(f"{console_live.url}/player/#key=ssp_live_")
    assert link.endswith("&venue=venue-1&screen=player-screen")
    key = link.split("#key=", 1)[1].split("&", 1)[0]

    api = f"{console_live.url}/api/v1"
    asked = httpx.post(
        f"{api}/ad/request", headers={"Ssp-Key": key}, json={"venue_id": "venue-1", "play_time": 2**31}
    )
    assert asked.status_code == 400 and asked.json()["error"]["field"] == "play_time"  # the key is accepted
    assert httpx.get(f"{api}/venues", headers={"Ssp-Key": key}).status_code == 403  # and may do nothing else
    report = {"venue_id": "venue-1", "screen_id": "player-screen", "version": "1.0.0", "fires_queued": 7}
    assert httpx.post(f"{api}/player/status", headers={"Ssp-Key": key}, json=report).status_code == 200

    row = _row(admin.get(SCREEN).text, "player-screen")
    assert "on air" in row and "v1.0.0" in row and "7 fires queued" in row

    page = admin.get(SCREEN)
    stopped = admin.post(
        SCREEN + "/screens/player-screen/player-stop", data={"csrf_token": csrf_of(page.text)}
    )
    assert stopped.status_code == 303
    row = _row(admin.get(SCREEN).text, "player-screen")
    assert "stopped" in row and "on air" not in row
    refused = httpx.post(f"{api}/player/status", headers={"Ssp-Key": key}, json=report)
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"


def test_a_viewer_cannot_make_a_player_link(console_live: LiveServer) -> None:
    viewer = signed_in(console_live, "viewer")
    page = viewer.get(SCREEN)
    assert "player-link" not in page.text
    made = viewer.post(SCREEN + "/screens/s/player-link", data={"csrf_token": csrf_of(page.text)})
    assert made.status_code == 403


def test_a_trafficker_sets_the_venues_player_settings_and_its_players_read_them(
    console_live: LiveServer,
) -> None:
    assert console_live.keys is not None
    trafficker = signed_in(console_live, "trafficker")
    page = trafficker.get(SCREEN)
    assert "Save player settings" in page.text
    saved = trafficker.post(
        SCREEN + "/player-settings",
        data={
            "csrf_token": csrf_of(page.text),
            "slot_seconds": "20",
            "lead_seconds": "60",
            "fallback_urls": "/media/demo.mp4\nhttps://cdn.example.test/house.jpg",
        },
    )
    assert saved.status_code == 303, saved.text
    config = httpx.get(
        f"{console_live.url}/api/v1/player/config",
        params={"venue_id": "venue-1"},
        headers={"Ssp-Key": console_live.keys.production},
    ).json()["data"]
    assert (config["slot_seconds"], config["lead_seconds"]) == (20, 60)
    assert config["fallback"] == [
        {"url": f"{console_live.url}/media/demo.mp4", "mime_type": "video/mp4"},
        {"url": "https://cdn.example.test/house.jpg", "mime_type": "image/jpeg"},
    ]
    page = trafficker.get(SCREEN)
    refused = trafficker.post(
        SCREEN + "/player-settings",
        data={"csrf_token": csrf_of(page.text), "slot_seconds": "0", "lead_seconds": "60"},
    )
    assert refused.status_code == 400 and "slot_seconds" in refused.text
    viewer = signed_in(console_live, "viewer")
    page = viewer.get(SCREEN)
    assert "Save player settings" not in page.text
    assert (
        viewer.post(SCREEN + "/player-settings", data={"csrf_token": csrf_of(page.text)}).status_code == 403
    )
