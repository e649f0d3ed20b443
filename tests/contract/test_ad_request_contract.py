"""The spec's ad request operation (sections 2.1, 2.2, 4.1): fields, formats, both paths, 204."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.conftest import PROD_VENUE, LiveServer, play_time

PATHS = ["/api/v1/ad/request", "/ad/request"]


@pytest.mark.parametrize("path", PATHS)
def test_json_answer_wraps_the_result_fields_in_status_and_data(live: LiveServer, http: httpx.Client, path: str) -> None:
    assert live.keys
    when = play_time()
    response = http.post(
        f"{live.url}{path}?format=json",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": PROD_VENUE, "screen_id": "s-1", "play_time": when},
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["status"] == 200
    data = body["data"]
    assert set(data) == {"vast_tag", "ad_request_uuid", "ad_request_expired_at", "venue_id", "screen_id"}
    assert data["venue_id"] == PROD_VENUE and data["screen_id"] == "s-1"
    assert data["ad_request_expired_at"] == when + live.settings.play_window_seconds
    assert data["ad_request_expired_at"] > time.time()
    assert f'<Ad id="{data["ad_request_uuid"]}">' in data["vast_tag"]
