"""The fast lane parses raw query strings itself: any bytes get a defined answer, never a 500."""

from __future__ import annotations

import httpx

from tests.conftest import LiveServer


def test_non_latin1_percent_escapes_in_a_pixel_query_get_a_400_not_a_500(
    live: LiveServer, http: httpx.Client
) -> None:
    response = http.get(
        f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid=01a20133-5465-78a2-9c1c-4875341844f0&event=%E2%9C%93"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_event"
    bad = http.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid=%FF%FE%E2%9C")
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "malformed_ad_request_uuid"
