"""The console's fleet forms over HTTP: a venue's opening hours set from its page (trafficker and above),
refused when malformed, and the venue page listing its screens' status."""

from __future__ import annotations

import httpx

from tests.conftest import PROD_VENUE, LiveServer, play_time
from tests.console.conftest import csrf_of, signed_in


def test_a_trafficker_sets_a_venues_opening_hours_from_its_page_and_a_viewer_cannot(
    console_live: LiveServer,
) -> None:
    assert console_live.keys is not None
    asked = httpx.post(
        f"{console_live.url}/api/v1/ad/request?format=json",
        json={"venue_id": PROD_VENUE, "screen_id": "hall-1", "play_time": play_time()},
        headers={"Ssp-Key": console_live.keys.production},
    )
    assert asked.status_code in (200, 204)
    page_path = f"/console/production/venues/v/{PROD_VENUE}"
    http = signed_in(console_live, "trafficker")
    try:
        page = http.get(page_path)
        assert (
            'data-screen="venue-1/hall-1" data-status="online"' in page.text and "unregistered" in page.text
        )
        saved = http.post(
            f"{page_path}/hours",
            data={"csrf_token": csrf_of(page.text), "hours": '{"mon": ["08:00-20:00"]}'},
        )
        assert saved.status_code == 303
        assert "08:00-20:00" in http.get(page_path).text
        bad = http.post(
            f"{page_path}/hours", data={"csrf_token": csrf_of(page.text), "hours": '{"mon": ["late"]}'}
        )
        assert bad.status_code == 400 and "hours.mon[0]" in bad.text
        cleared = http.post(f"{page_path}/hours", data={"csrf_token": csrf_of(page.text), "hours": ""})
        assert cleared.status_code == 303
    finally:
        http.close()
    api = httpx.get(
        f"{console_live.url}/api/v1/venues/{PROD_VENUE}/hours",
        headers={"Ssp-Key": console_live.keys.production_admin_only},
    )
    assert api.json()["hours"] is None
    viewer = signed_in(console_live, "viewer")
    try:
        page = viewer.get(page_path)
        refused = viewer.post(f"{page_path}/hours", data={"csrf_token": csrf_of(page.text), "hours": ""})
        assert refused.status_code == 403
    finally:
        viewer.close()
