"""The management API: admin keys manage inventory and campaigns; changes reach decisions without restarts."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
import pytest

from tests.conftest import LiveServer, play_time


def admin(live: LiveServer) -> dict[str, str]:
    assert live.keys
    return {"Ssp-Key": live.keys.production_admin}


def eventually(check: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def ad_status(live: LiveServer, venue_id: str) -> int:
    assert live.keys
    return httpx.post(
        f"{live.url}/api/v1/ad/request",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": venue_id, "play_time": play_time()},
    ).status_code


def test_a_new_venue_and_campaign_fill_ad_requests_without_a_restart(
    live: LiveServer, http: httpx.Client
) -> None:
    venue = http.post(
        f"{live.url}/api/v1/venues",
        headers=admin(live),
        json={
            "venue_id": "mall-7",
            "name": "Mall 7",
            "timezone": "America/New_York",
            "latitude": 40.7,
            "longitude": -74.0,
            "venue_type": "retail",
        },
    )
    assert venue.status_code == 201, venue.text
    screen = http.post(
        f"{live.url}/api/v1/venues/mall-7/screens",
        headers=admin(live),
        json={"screen_id": "east-1", "width": 1080, "height": 1920},
    )
    assert screen.status_code == 201
    assert (
        http.get(f"{live.url}/api/v1/venues/mall-7", headers=admin(live)).json()["screens"][0]["screen_id"]
        == "east-1"
    )
    assert ad_status(live, "mall-7") == 204
    advertiser = http.post(
        f"{live.url}/api/v1/advertisers", headers=admin(live), json={"name": "Mall Shoes"}
    ).json()
    now = int(time.time())
    campaign = http.post(
        f"{live.url}/api/v1/campaigns",
        headers=admin(live),
        json={
            "advertiser_id": advertiser["id"],
            "name": "Shoes",
            "start_at": now - 10,
            "end_at": now + 86400,
            "venue_ids": ["mall-7"],
        },
    ).json()
    assert campaign["venue_ids"] == ["mall-7"] and campaign["all_venues"] is False
    assert ad_status(live, "mall-7") == 204, "a campaign without creatives must not fill"
    creative = http.post(
        f"{live.url}/api/v1/campaigns/{campaign['id']}/creatives",
        headers=admin(live),
        json={
            "name": "Shoes 10s",
            "media_url": "https://cdn.example.test/shoes.mp4",
            "mime_type": "video/mp4",
            "width": 1080,
            "height": 1920,
            "duration_seconds": 10,
        },
    )
    assert creative.status_code == 201, creative.text
    assert eventually(lambda: ad_status(live, "mall-7") == 200)
    paused = http.patch(
        f"{live.url}/api/v1/campaigns/{campaign['id']}", headers=admin(live), json={"status": "paused"}
    )
    assert paused.status_code == 200 and paused.json()["status"] == "paused"
    assert eventually(lambda: ad_status(live, "mall-7") == 204)


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code", "field"),
    [
        ("post", "/api/v1/venues", {"venue_id": "", "name": "x"}, 400, "invalid_field", "venue_id"),
        (
            "post",
            "/api/v1/venues",
            {"venue_id": "v", "name": "x", "timezone": "Mars/Olympus"},
            422,
            "invalid_timezone",
            "timezone",
        ),
        (
            "post",
            "/api/v1/venues",
            {"venue_id": "v", "name": "x", "latitude": 91},
            400,
            "invalid_field",
            "latitude",
        ),
        ("post", "/api/v1/venues", {"venue_id": "venue-1", "name": "dup"}, 409, "venue_exists", "venue_id"),
        ("post", "/api/v1/advertisers", {"name": 5}, 400, "invalid_field", "name"),
        (
            "post",
            "/api/v1/advertisers",
            {"name": "long", "category": "c" * 65},
            400,
            "invalid_field",
            "category",
        ),
        (
            "post",
            "/api/v1/venues",
            {"venue_id": "v", "name": "x", "venue_type": "t" * 65},
            400,
            "invalid_field",
            "venue_type",
        ),
        (
            "post",
            "/api/v1/campaigns",
            {"advertiser_id": 999999, "name": "c", "start_at": 1, "end_at": 2},
            422,
            "unknown_advertiser",
            "advertiser_id",
        ),
        (
            "post",
            "/api/v1/campaigns",
            {"advertiser_id": 1, "name": "c", "start_at": 5, "end_at": 5},
            422,
            "invalid_flight",
            "end_at",
        ),
        ("get", "/api/v1/campaigns/999999", None, 404, "campaign_not_found", "campaign_id"),
        ("get", "/api/v1/venues/nowhere", None, 404, "venue_not_found", "venue_id"),
        (
            "post",
            "/api/v1/campaigns/1/creatives",
            {
                "name": "c",
                "media_url": "ftp://x",
                "mime_type": "video/mp4",
                "width": 1,
                "height": 1,
                "duration_seconds": 1,
            },
            400,
            "invalid_field",
            "media_url",
        ),
        (
            "post",
            "/api/v1/campaigns/1/creatives",
            {
                "name": "c",
                "media_url": "https://x/y.mp4",
                "mime_type": "image/png",
                "width": 1,
                "height": 1,
                "duration_seconds": 1,
            },
            400,
            "invalid_field",
            "mime_type",
        ),
    ],
)
def test_bad_management_input_gets_the_error_envelope_with_code_and_field(
    live: LiveServer,
    http: httpx.Client,
    method: str,
    path: str,
    body: object,
    status: int,
    code: str,
    field: str,
) -> None:
    response = http.request(method.upper(), f"{live.url}{path}", headers=admin(live), json=body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert (response.json()["status"], error["code"], error["field"]) == (status, code, field)


def test_management_needs_an_admin_key(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys
    assert http.get(f"{live.url}/api/v1/campaigns").json()["error"]["code"] == "missing_api_key"
    forbidden = http.get(f"{live.url}/api/v1/campaigns", headers={"Ssp-Key": live.keys.production})
    assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "insufficient_scope"
    assert (
        http.get(
            f"{live.url}/api/v1/campaigns", headers={"Ssp-Key": live.keys.production_admin_only}
        ).status_code
        == 200
    )


def test_sandbox_and_production_catalogs_are_separate(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys
    sandbox = http.get(f"{live.sandbox_url}/api/v1/campaigns", headers={"Ssp-Key": live.keys.sandbox}).json()
    production = http.get(f"{live.url}/api/v1/campaigns", headers=admin(live)).json()
    assert [c["name"] for c in sandbox] == ["Sandbox demo campaign"]
    assert "Sandbox demo campaign" not in [c["name"] for c in production]
