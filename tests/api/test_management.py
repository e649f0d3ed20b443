"""The management API: admin keys manage inventory and campaigns; changes reach decisions without restarts."""

from __future__ import annotations

import time
from xml.sax.saxutils import escape

import httpx
import pytest

from tests.conftest import LiveServer, eventually, play_time


def admin(live: LiveServer) -> dict[str, str]:
    assert live.keys
    return {"Ssp-Key": live.keys.production_admin}


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
    assert screen.status_code == 201, screen.text
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
        (
            "post",
            "/api/v1/venues/venue-1/screens",
            {"screen_id": "x", "orientation": "round"},
            400,
            "invalid_field",
            "orientation",
        ),
        (
            "post",
            "/api/v1/venues/venue-1/screens",
            {"screen_id": "x", "mime_types": ["image/png"]},
            400,
            "invalid_field",
            "mime_types[0]",
        ),
        (
            "post",
            "/api/v1/venues/venue-1/screens",
            {"screen_id": "x", "mime_types": []},
            400,
            "invalid_field",
            "mime_types",
        ),
        (
            "post",
            "/api/v1/venues/venue-1/screens",
            {"screen_id": "x", "max_duration_seconds": 0},
            400,
            "invalid_field",
            "max_duration_seconds",
        ),
        ("patch", "/api/v1/venues/venue-1/screens/nope", {"name": "x"}, 404, "screen_not_found", "screen_id"),
        ("patch", "/api/v1/venues/nowhere/screens/s1", {"name": "x"}, 404, "venue_not_found", "venue_id"),
        ("patch", "/api/v1/venues/venue-1/screens/nope", {"width": 0}, 400, "invalid_field", "width"),
        # Ids that name a path: a "/" no URL could reach, and a blank no ad request may name.
        (
            "post",
            "/api/v1/venues",
            {"venue_id": "a/b", "name": "A", "timezone": "UTC"},
            400,
            "invalid_field",
            "venue_id",
        ),
        (
            "post",
            "/api/v1/venues",
            {"venue_id": "   ", "name": "A", "timezone": "UTC"},
            400,
            "invalid_field",
            "venue_id",
        ),
        ("post", "/api/v1/venues/venue-1/screens", {"screen_id": "x/y"}, 400, "invalid_field", "screen_id"),
        ("post", "/api/v1/venues/venue-1/screens", {"screen_id": " "}, 400, "invalid_field", "screen_id"),
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
    sandbox_admin = {"Ssp-Key": live.keys.sandbox_admin_only}
    sandbox = http.get(f"{live.sandbox_url}/api/v1/campaigns", headers=sandbox_admin).json()
    production = http.get(f"{live.url}/api/v1/campaigns", headers=admin(live)).json()
    assert [c["name"] for c in sandbox] == ["Sandbox demo campaign"]
    assert "Sandbox demo campaign" not in [c["name"] for c in production]


# Decisioning fields (issue "Ad decisioning", items 1-4): each shown back as sent, each bad value refused.

NOW = int(time.time())
CAMPAIGN = {"advertiser_id": 1, "name": "base", "start_at": NOW - 60, "end_at": NOW + 86400}
"""A valid campaign body (advertiser 1 is the seeded Acme, which has no category)."""
CREATIVE = {
    "name": "c",
    "media_url": "https://cdn.example.test/c.mp4",
    "mime_type": "video/mp4",
    "width": 1920,
    "height": 1080,
    "duration_seconds": 15,
}


def post(http: httpx.Client, live: LiveServer, path: str, body: object) -> httpx.Response:
    return http.post(f"{live.url}{path}", headers=admin(live), json=body)


def patch(http: httpx.Client, live: LiveServer, path: str, body: object) -> httpx.Response:
    return http.patch(f"{live.url}{path}", headers=admin(live), json=body)


def get(http: httpx.Client, live: LiveServer, path: str) -> httpx.Response:
    return http.get(f"{live.url}{path}", headers=admin(live))


def error_of(response: httpx.Response) -> tuple[int, str, str | None]:
    body = response.json()
    assert body["status"] == response.status_code, response.text
    return response.status_code, body["error"]["code"], body["error"]["field"]


def categorised_advertiser(http: httpx.Client, live: LiveServer, name: str) -> int:
    response = post(http, live, "/api/v1/advertisers", {"name": name, "category": "shoes"})
    assert response.status_code == 201, response.text
    return int(response.json()["id"])


FULL_RULES = {
    "tier": "sponsorship",
    "weight": 250,
    "timezone": "Europe/Berlin",
    "targeting": {
        "venue_ids": ["venue-1"],
        "venue_types": ["1.1", "2"],
        "venue_tags": ["premium"],
        "geo": {
            "countries": ["DE", "AT"],
            "regions": ["BE"],
            "cities": ["Berlin"],
            "radius": [{"latitude": 52.52, "longitude": 13.405, "radius_km": 25.5}],
        },
        "screen_ids": ["s1"],
        "screens": [{"venue_id": "venue-1", "screen_id": "s2"}],
    },
    "exclusions": {
        "venue_ids": ["venue-empty"],
        "venue_types": ["1.1.2"],
        "venue_tags": ["kids"],
        "geo": {"countries": ["CH"], "regions": None, "cities": None, "radius": None},
        "screen_ids": ["s9"],
        "screens": [{"venue_id": "venue-1", "screen_id": "s8"}],
    },
    "dayparts": [
        {"days": ["mon", "tue", "wed", "thu", "fri"], "start_hour": 7, "end_hour": 10},
        {"days": ["sat"], "start_hour": 22, "end_hour": 2},
    ],
    "caps": [
        {"period": "lifetime", "metric": "plays", "limit": 100000},
        {"period": "daily", "metric": "impressions", "limit": 2500},
        {"period": "lifetime", "metric": "spend", "limit": 1234.567891},
    ],
    "cpm": 7.25,
    "pacing": "even",
    "frequency": {"per_hour": 2, "per_day": 12},
    "separation_minutes": 30,
    "share_of_voice": 0.25,
}


def test_every_campaign_rule_is_stored_and_shown_back_in_the_shape_it_was_sent(
    live: LiveServer, http: httpx.Client
) -> None:
    advertiser_id = categorised_advertiser(http, live, "Rules shown back")
    body = {**CAMPAIGN, "advertiser_id": advertiser_id, "name": "all rules", **FULL_RULES}
    created = post(http, live, "/api/v1/campaigns", body)
    assert created.status_code == 201, created.text
    fetched = get(http, live, f"/api/v1/campaigns/{created.json()['id']}").json()
    for shown in (created.json(), fetched):
        assert {k: shown[k] for k in FULL_RULES} == FULL_RULES
        assert shown["venue_ids"] == ["venue-1"] and shown["all_venues"] is False


def test_campaign_rules_have_defaults_that_restrict_nothing(live: LiveServer, http: httpx.Client) -> None:
    shown = post(http, live, "/api/v1/campaigns", {**CAMPAIGN, "name": "defaults"}).json()
    empty = {"venue_types": None, "venue_tags": None, "geo": None, "screen_ids": None, "screens": None}
    assert {k: shown[k] for k in FULL_RULES} == {
        "tier": "standard",
        "weight": 100,
        "timezone": "UTC",
        "targeting": {"venue_ids": None, **empty},
        "exclusions": {"venue_ids": None, **empty},
        "dayparts": [],
        "caps": [],
        "cpm": None,
        "pacing": "asap",
        "frequency": None,
        "separation_minutes": 0,
        "share_of_voice": None,
    }


def test_country_codes_are_accepted_in_either_case_and_stored_upper(
    live: LiveServer, http: httpx.Client
) -> None:
    body = {**CAMPAIGN, "name": "countries", "targeting": {"geo": {"countries": ["de", "Fr"]}}}
    shown = post(http, live, "/api/v1/campaigns", body).json()
    assert shown["targeting"]["geo"]["countries"] == ["DE", "FR"]


def test_targeting_venue_ids_is_the_campaign_venue_list(live: LiveServer, http: httpx.Client) -> None:
    body = {**CAMPAIGN, "name": "inner venues", "targeting": {"venue_ids": ["venue-1"]}}
    shown = post(http, live, "/api/v1/campaigns", body).json()
    assert (shown["venue_ids"], shown["all_venues"]) == (["venue-1"], False)


def test_a_campaign_sold_on_one_venues_screen_never_plays_on_that_screen_id_elsewhere(
    live: LiveServer, http: httpx.Client
) -> None:
    for venue_id in ("pair-a", "pair-b"):
        assert post(http, live, "/api/v1/venues", {"venue_id": venue_id, "name": venue_id}).status_code == 201
        screen = post(http, live, f"/api/v1/venues/{venue_id}/screens", {"screen_id": "s1"})
        assert screen.status_code == 201, screen.text
    body = {
        **CAMPAIGN,
        "name": "pair-a s1 only",
        "tier": "sponsorship",
        "share_of_voice": 1.0,
        "targeting": {"screens": [{"venue_id": "pair-a", "screen_id": "s1"}]},
    }
    created = post(http, live, "/api/v1/campaigns", body)
    assert created.status_code == 201, created.text
    campaign_id = created.json()["id"]
    assert post(http, live, f"/api/v1/campaigns/{campaign_id}/creatives", CREATIVE).status_code == 201

    def campaign_played(venue_id: str) -> int | None:
        assert live.keys
        answer = http.post(
            f"{live.url}/api/v1/ad/request",
            headers={"Ssp-Key": live.keys.production},
            json={"venue_id": venue_id, "screen_id": "s1", "play_time": play_time()},
        )
        if answer.status_code == 204:
            return None
        assert answer.status_code == 200, answer.text
        uuid = answer.json()["data"]["ad_request_uuid"]
        record = http.get(f"{live.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": live.keys.production})
        assert record.status_code == 200, record.text
        return int(record.json()["data"]["campaign_id"])

    assert eventually(lambda: campaign_played("pair-a") == campaign_id)
    assert all(campaign_played("pair-b") != campaign_id for _ in range(5))


BAD_CAMPAIGNS = [
    ({"tier": "gold"}, 400, "invalid_field", "tier"),
    ({"weight": 0}, 400, "invalid_field", "weight"),
    ({"weight": 1_000_001}, 400, "invalid_field", "weight"),
    ({"timezone": "Mars/Olympus"}, 422, "invalid_timezone", "timezone"),
    ({"targeting": {"venue_types": ["retail"]}}, 400, "invalid_field", "targeting.venue_types[0]"),
    ({"targeting": {"venue_tags": [""]}}, 400, "invalid_field", "targeting.venue_tags[0]"),
    ({"targeting": {"geo": {"countries": ["XX"]}}}, 400, "invalid_field", "targeting.geo.countries[0]"),
    (
        {"targeting": {"geo": {"countries": ["DE", "DEU"]}}},
        400,
        "invalid_field",
        "targeting.geo.countries[1]",
    ),
    ({"targeting": {"geo": {"regions": ["r" * 65]}}}, 400, "invalid_field", "targeting.geo.regions[0]"),
    (
        {"targeting": {"geo": {"radius": [{"latitude": 91, "longitude": 0, "radius_km": 1}]}}},
        400,
        "invalid_field",
        "targeting.geo.radius[0].latitude",
    ),
    (
        {"targeting": {"geo": {"radius": [{"latitude": 1, "longitude": 0, "radius_km": 0}]}}},
        400,
        "invalid_field",
        "targeting.geo.radius[0].radius_km",
    ),
    ({"targeting": {"venue": ["x"]}}, 400, "invalid_field", "targeting"),
    ({"exclusions": {"screen_ids": [""]}}, 400, "invalid_field", "exclusions.screen_ids[0]"),
    (
        {"targeting": {"screens": [{"venue_id": "v", "screen_id": ""}]}},
        400,
        "invalid_field",
        "targeting.screens[0].screen_id",
    ),
    ({"targeting": {"screens": [{"venue_id": "v"}]}}, 400, "invalid_field", "targeting.screens[0]"),
    ({"targeting": {"screens": ["v/s1"]}}, 400, "invalid_field", "targeting.screens[0]"),
    ({"exclusions": {"geo": {"countries": ["ZZ"]}}}, 400, "invalid_field", "exclusions.geo.countries[0]"),
    (
        {"venue_ids": ["venue-1"], "targeting": {"venue_ids": ["venue-1"]}},
        400,
        "invalid_field",
        "venue_ids",
    ),
    (
        {"dayparts": [{"days": ["mon"], "start_hour": 24, "end_hour": 2}]},
        400,
        "invalid_field",
        "dayparts[0].start_hour",
    ),
    (
        {"dayparts": [{"days": ["mon"], "start_hour": 1, "end_hour": 0}]},
        400,
        "invalid_field",
        "dayparts[0].end_hour",
    ),
    ({"dayparts": [{"days": [], "start_hour": 1, "end_hour": 2}]}, 400, "invalid_field", "dayparts[0].days"),
    (
        {"dayparts": [{"days": ["monday"], "start_hour": 1, "end_hour": 2}]},
        400,
        "invalid_field",
        "dayparts[0].days[0]",
    ),
    (
        {"dayparts": [{"days": ["mon", "mon"], "start_hour": 1, "end_hour": 2}]},
        400,
        "invalid_field",
        "dayparts[0].days",
    ),
    ({"caps": [{"period": "weekly", "metric": "plays", "limit": 1}]}, 400, "invalid_field", "caps[0].period"),
    ({"caps": [{"period": "daily", "metric": "clicks", "limit": 1}]}, 400, "invalid_field", "caps[0].metric"),
    ({"caps": [{"period": "daily", "metric": "plays", "limit": 1.5}]}, 400, "invalid_field", "caps[0].limit"),
    (
        {"caps": [{"period": "daily", "metric": "impressions", "limit": 0.5}]},
        400,
        "invalid_field",
        "caps[0].limit",
    ),
    ({"caps": [{"period": "daily", "metric": "plays", "limit": 0}]}, 400, "invalid_field", "caps[0].limit"),
    ({"caps": [{"period": "daily", "metric": "plays", "limit": -3}]}, 400, "invalid_field", "caps[0].limit"),
    (
        {"cpm": 2, "caps": [{"period": "daily", "metric": "spend", "limit": 1.0000001}]},
        400,
        "invalid_field",
        "caps[0].limit",
    ),
    (
        {
            "caps": [
                {"period": "daily", "metric": "plays", "limit": 1},
                {"period": "daily", "metric": "plays", "limit": 2},
            ]
        },
        400,
        "invalid_field",
        "caps[1]",
    ),
    ({"caps": [{"period": "daily", "metric": "spend", "limit": 10}]}, 422, "invalid_goal", "cpm"),
    ({"cpm": 0}, 400, "invalid_field", "cpm"),
    ({"cpm": 1.0000001}, 400, "invalid_field", "cpm"),
    ({"pacing": "fast"}, 400, "invalid_field", "pacing"),
    ({"pacing": "even"}, 422, "invalid_goal", "pacing"),
    ({"frequency": {}}, 400, "invalid_field", "frequency"),
    ({"frequency": {"per_hour": 0}}, 400, "invalid_field", "frequency.per_hour"),
    ({"separation_minutes": 1441}, 400, "invalid_field", "separation_minutes"),
    ({"separation_minutes": -1}, 400, "invalid_field", "separation_minutes"),
    ({"separation_minutes": 15}, 422, "missing_category", "separation_minutes"),
    ({"share_of_voice": 0}, 400, "invalid_field", "share_of_voice"),
    ({"share_of_voice": 1.01}, 400, "invalid_field", "share_of_voice"),
]


@pytest.mark.parametrize(("change", "status", "code", "field"), BAD_CAMPAIGNS)
def test_a_bad_campaign_rule_is_refused_with_its_code_and_path_and_nothing_is_stored(
    live: LiveServer,
    http: httpx.Client,
    change: dict[str, object],
    status: int,
    code: str,
    field: str,
) -> None:
    name = f"refused {status} {field}"
    response = post(http, live, "/api/v1/campaigns", {**CAMPAIGN, "name": name, **change})
    assert error_of(response) == (status, code, field), response.text
    assert name not in [c["name"] for c in get(http, live, "/api/v1/campaigns").json()]


def test_a_patch_changes_only_the_members_it_gives(live: LiveServer, http: httpx.Client) -> None:
    advertiser_id = categorised_advertiser(http, live, "Patched")
    body = {**CAMPAIGN, "advertiser_id": advertiser_id, "name": "to patch", **FULL_RULES}
    campaign = post(http, live, "/api/v1/campaigns", body).json()
    path = f"/api/v1/campaigns/{campaign['id']}"
    changed = patch(http, live, path, {"weight": 7, "tier": "house", "dayparts": []})
    assert changed.status_code == 200, changed.text
    expected = {**campaign, "weight": 7, "tier": "house", "dayparts": []}
    assert changed.json() == expected
    assert get(http, live, path).json() == expected


def test_a_patch_replaces_nested_rules_whole_and_null_clears_them(
    live: LiveServer, http: httpx.Client
) -> None:
    body = {
        **CAMPAIGN,
        "name": "replace",
        **{k: v for k, v in FULL_RULES.items() if k != "separation_minutes"},
    }
    campaign = post(http, live, "/api/v1/campaigns", body).json()
    path = f"/api/v1/campaigns/{campaign['id']}"
    caps = [{"period": "daily", "metric": "plays", "limit": 10}]
    shown = patch(
        http,
        live,
        path,
        {"caps": caps, "cpm": None, "frequency": None, "share_of_voice": None, "exclusions": None},
    ).json()
    assert shown["caps"] == caps
    assert (shown["cpm"], shown["frequency"], shown["share_of_voice"]) == (None, None, None)
    assert shown["exclusions"]["venue_ids"] is None and shown["exclusions"]["geo"] is None
    assert shown["pacing"] == "even" and shown["dayparts"] == FULL_RULES["dayparts"]


def test_a_patched_targeting_keeps_the_venue_list_unless_it_names_one(
    live: LiveServer, http: httpx.Client
) -> None:
    body = {**CAMPAIGN, "name": "venue list", "venue_ids": ["venue-1"]}
    path = f"/api/v1/campaigns/{post(http, live, '/api/v1/campaigns', body).json()['id']}"
    kept = patch(http, live, path, {"targeting": {"venue_tags": ["premium"]}}).json()
    assert (kept["venue_ids"], kept["all_venues"]) == (["venue-1"], False)
    assert kept["targeting"]["venue_ids"] == ["venue-1"]
    assert kept["targeting"]["venue_tags"] == ["premium"]
    moved = patch(http, live, path, {"targeting": {"venue_ids": ["venue-empty"]}}).json()
    assert (moved["venue_ids"], moved["all_venues"]) == (["venue-empty"], False)
    assert moved["targeting"]["venue_tags"] is None
    everywhere = patch(http, live, path, {"targeting": {"venue_ids": None}}).json()
    assert everywhere["all_venues"] is True and everywhere["targeting"]["venue_ids"] is None
    back = patch(http, live, path, {"venue_ids": ["venue-1"]}).json()
    assert (back["all_venues"], back["targeting"]["venue_ids"]) == (False, ["venue-1"])
    cleared = patch(http, live, path, {"targeting": None}).json()
    assert cleared["all_venues"] is True and cleared["targeting"]["venue_ids"] is None


BAD_CAMPAIGN_PATCHES = [
    ({"tier": None}, 400, "invalid_field", "tier"),
    ({"weight": 0}, 400, "invalid_field", "weight"),
    ({"timezone": "Nope/Nope"}, 422, "invalid_timezone", "timezone"),
    ({"pacing": "even"}, 422, "invalid_goal", "pacing"),
    ({"caps": [{"period": "lifetime", "metric": "spend", "limit": 5}]}, 422, "invalid_goal", "cpm"),
    ({"separation_minutes": 5}, 422, "missing_category", "separation_minutes"),
    ({"dayparts": None}, 400, "invalid_field", "dayparts"),
    ({"targeting": {"geo": {"countries": ["UK"]}}}, 400, "invalid_field", "targeting.geo.countries[0]"),
    ({"venue_ids": ["venue-1"], "targeting": {"venue_ids": ["x"]}}, 400, "invalid_field", "venue_ids"),
    ({"all_venues": True, "targeting": {"venue_ids": ["x"]}}, 400, "invalid_field", "all_venues"),
    ({"start_at": NOW + 10**6}, 422, "invalid_flight", "end_at"),
]


@pytest.mark.parametrize(("change", "status", "code", "field"), BAD_CAMPAIGN_PATCHES)
def test_a_bad_campaign_patch_is_refused_and_changes_nothing(
    live: LiveServer,
    http: httpx.Client,
    change: dict[str, object],
    status: int,
    code: str,
    field: str,
) -> None:
    created = post(http, live, "/api/v1/campaigns", {**CAMPAIGN, "name": f"unpatched {field}", "weight": 3})
    path = f"/api/v1/campaigns/{created.json()['id']}"
    response = patch(http, live, path, {"name": "renamed", **change})
    assert error_of(response) == (status, code, field), response.text
    assert get(http, live, path).json() == created.json()


def test_a_spend_cap_cannot_lose_its_cpm(live: LiveServer, http: httpx.Client) -> None:
    body = {
        **CAMPAIGN,
        "name": "spend",
        "cpm": 3,
        "caps": [{"period": "daily", "metric": "spend", "limit": 9.5}],
    }
    path = f"/api/v1/campaigns/{post(http, live, '/api/v1/campaigns', body).json()['id']}"
    assert error_of(patch(http, live, path, {"cpm": None})) == (422, "invalid_goal", "cpm")
    assert get(http, live, path).json()["cpm"] == 3


def campaign_with_creative(http: httpx.Client, live: LiveServer, name: str) -> tuple[int, dict[str, object]]:
    campaign_id = post(http, live, "/api/v1/campaigns", {**CAMPAIGN, "name": name}).json()["id"]
    creative = post(http, live, f"/api/v1/campaigns/{campaign_id}/creatives", CREATIVE)
    assert creative.status_code == 201, creative.text
    return int(campaign_id), creative.json()


def test_creative_weight_size_and_checksum_are_stored_and_shown_back(
    live: LiveServer, http: httpx.Client
) -> None:
    campaign_id, plain = campaign_with_creative(http, live, "creative fields")
    assert (plain["weight"], plain["size_bytes"], plain["sha256"]) == (100, None, None)
    extra = {"weight": 3, "size_bytes": 123456, "sha256": "ab" * 32}
    made = post(http, live, f"/api/v1/campaigns/{campaign_id}/creatives", {**CREATIVE, **extra}).json()
    assert {k: made[k] for k in extra} == extra
    listed = get(http, live, f"/api/v1/campaigns/{campaign_id}").json()["creatives"]
    assert [{k: c[k] for k in extra} for c in listed][1] == extra


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"weight": 0}, "weight"),
        ({"size_bytes": 0}, "size_bytes"),
        ({"sha256": "AB" * 32}, "sha256"),
        ({"sha256": "ab" * 31}, "sha256"),
    ],
)
def test_a_bad_creative_field_is_refused(
    live: LiveServer, http: httpx.Client, change: dict[str, object], field: str
) -> None:
    response = post(http, live, "/api/v1/campaigns/1/creatives", {**CREATIVE, **change})
    assert error_of(response) == (400, "invalid_field", field)


def test_a_creative_can_be_paused_reweighed_and_renamed(live: LiveServer, http: httpx.Client) -> None:
    campaign_id, creative = campaign_with_creative(http, live, "creative patch")
    path = f"/api/v1/campaigns/{campaign_id}/creatives/{creative['id']}"
    changed = patch(http, live, path, {"status": "paused", "weight": 40, "name": "renamed"})
    assert changed.status_code == 200, changed.text
    assert changed.json() == {**creative, "status": "paused", "weight": 40, "name": "renamed"}
    resumed = patch(http, live, path, {"status": "active"}).json()
    assert (resumed["status"], resumed["weight"]) == ("active", 40)
    shown = get(http, live, f"/api/v1/campaigns/{campaign_id}").json()["creatives"]
    assert shown == [resumed]


def test_a_creative_patch_names_only_the_campaigns_own_creatives(
    live: LiveServer, http: httpx.Client
) -> None:
    campaign_id, creative = campaign_with_creative(http, live, "owner")
    other_id, _ = campaign_with_creative(http, live, "not the owner")
    foreign = patch(http, live, f"/api/v1/campaigns/{other_id}/creatives/{creative['id']}", {"weight": 2})
    assert error_of(foreign) == (404, "creative_not_found", "creative_id")
    missing = patch(http, live, f"/api/v1/campaigns/999999/creatives/{creative['id']}", {"weight": 2})
    assert error_of(missing) == (404, "campaign_not_found", "campaign_id")
    path = f"/api/v1/campaigns/{campaign_id}/creatives/{creative['id']}"
    assert error_of(patch(http, live, path, {"status": "archived"})) == (400, "invalid_field", "status")
    assert error_of(patch(http, live, path, {"weight": 0})) == (400, "invalid_field", "weight")
    assert get(http, live, f"/api/v1/campaigns/{campaign_id}").json()["creatives"] == [creative]


HOURLY = [1.0] * 84 + [2.5] * 84
VENUE_FIELDS = {
    "tags": ["premium", "indoor"],
    "country": "DE",
    "region": "BE",
    "city": "Berlin",
    "impressions_per_play": 3.5,
    "hourly_impressions": HOURLY,
}


def test_venue_audience_and_geography_are_stored_and_shown_back(live: LiveServer, http: httpx.Client) -> None:
    created = post(http, live, "/api/v1/venues", {"venue_id": "geo-1", "name": "Geo", **VENUE_FIELDS})
    assert created.status_code == 201, created.text
    for shown in (created.json(), get(http, live, "/api/v1/venues/geo-1").json()):
        assert {k: shown[k] for k in VENUE_FIELDS} == VENUE_FIELDS
    plain = post(http, live, "/api/v1/venues", {"venue_id": "geo-2", "name": "Plain", "country": "at"}).json()
    assert {k: plain[k] for k in VENUE_FIELDS} == {
        "tags": [],
        "country": "AT",
        "region": None,
        "city": None,
        "impressions_per_play": 1.0,
        "hourly_impressions": None,
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"country": "XX"}, "country"),
        ({"country": "DEU"}, "country"),
        ({"region": "r" * 65}, "region"),
        ({"tags": [""]}, "tags[0]"),
        ({"tags": "premium"}, "tags"),
        ({"impressions_per_play": 0}, "impressions_per_play"),
        ({"hourly_impressions": [1.0] * 167}, "hourly_impressions"),
        ({"hourly_impressions": [1.0] * 169}, "hourly_impressions"),
        ({"hourly_impressions": [1.0] * 3 + [-1.0] + [1.0] * 164}, "hourly_impressions[3]"),
        ({"latitude": 52.5}, "longitude"),
        ({"longitude": 13.4}, "latitude"),
        ({"venue_id": "import"}, "venue_id"),
    ],
)
def test_a_bad_venue_field_is_refused(
    live: LiveServer, http: httpx.Client, change: dict[str, object], field: str
) -> None:
    body = {"venue_id": "bad-venue", "name": "Bad", **change}
    assert error_of(post(http, live, "/api/v1/venues", body)) == (400, "invalid_field", field)
    assert get(http, live, f"/api/v1/venues/{body['venue_id']}").status_code in (404, 405)


def test_a_venue_patch_changes_only_what_it_gives_and_null_clears(
    live: LiveServer, http: httpx.Client
) -> None:
    venue = post(http, live, "/api/v1/venues", {"venue_id": "geo-3", "name": "Geo 3", **VENUE_FIELDS}).json()
    changed = patch(http, live, "/api/v1/venues/geo-3", {"city": "Potsdam", "tags": ["outdoor"]}).json()
    assert changed == {**venue, "city": "Potsdam", "tags": ["outdoor"]}
    cleared = patch(http, live, "/api/v1/venues/geo-3", {"region": None, "hourly_impressions": None}).json()
    assert (cleared["region"], cleared["hourly_impressions"], cleared["city"]) == (None, None, "Potsdam")
    half = patch(http, live, "/api/v1/venues/geo-3", {"latitude": 52.4})
    assert error_of(half) == (400, "invalid_field", "longitude")
    placed = patch(http, live, "/api/v1/venues/geo-3", {"latitude": 52.4, "longitude": 13.1}).json()
    assert (placed["latitude"], placed["longitude"]) == (52.4, 13.1)
    assert error_of(patch(http, live, "/api/v1/venues/geo-3", {"country": "QQ"})) == (
        400,
        "invalid_field",
        "country",
    )
    assert get(http, live, "/api/v1/venues/geo-3").json()["country"] == "DE"


SCREEN_FIELDS = {
    "orientation": "portrait",
    "mime_types": ["video/mp4", "video/webm"],
    "max_duration_seconds": 30,
}


def test_screen_fit_is_stored_shown_back_and_patchable(live: LiveServer, http: httpx.Client) -> None:
    post(http, live, "/api/v1/venues", {"venue_id": "fit-1", "name": "Fit"})
    made = post(
        http, live, "/api/v1/venues/fit-1/screens", {"screen_id": "p1", "width": 1080, **SCREEN_FIELDS}
    )
    assert made.status_code == 201, made.text
    assert {k: made.json()[k] for k in SCREEN_FIELDS} == SCREEN_FIELDS
    path = "/api/v1/venues/fit-1/screens/p1"
    changed = patch(http, live, path, {"orientation": "square", "mime_types": None, "name": "Pillar"})
    assert changed.status_code == 200, changed.text
    assert changed.json() == {**made.json(), "orientation": "square", "mime_types": None, "name": "Pillar"}
    assert get(http, live, "/api/v1/venues/fit-1").json()["screens"] == [changed.json()]


def import_csv(
    http: httpx.Client, live: LiveServer, body: str | bytes, content_type: str = "text/csv"
) -> httpx.Response:
    return http.post(
        f"{live.url}/api/v1/venues/import",
        headers={**admin(live), "Content-Type": content_type},
        content=body.encode() if isinstance(body, str) else body,
    )


IMPORT = (
    "venue_id,name,timezone,latitude,longitude,venue_type,tags,country,region,city,impressions_per_play,"
    "screen_id,screen_name,width,height,orientation,mime_types,max_duration_seconds\n"
    "csv-mall,CSV Mall,Europe/Berlin,52.5,13.4,1.1,premium;indoor,de,BE,Berlin,2.5,"
    "m1,Entrance,1920,1080,landscape,video/mp4;video/webm,30\n"
    "csv-mall,,,,,,,,,,,m2,Pillar,1080,1920,portrait,,\n"
    '"csv-station","Station, main hall",UTC,,,,,,,,,,,,,,,\n'
)


def test_a_csv_import_creates_venues_and_screens_with_every_column(
    live: LiveServer, http: httpx.Client
) -> None:
    response = import_csv(http, live, IMPORT)
    assert response.status_code == 200, response.text
    assert response.json() == {
        "status": 200,
        "data": {"venues_created": 2, "venues_updated": 0, "screens_created": 2, "screens_updated": 0},
    }
    mall = get(http, live, "/api/v1/venues/csv-mall").json()
    assert {k: mall[k] for k in ("name", "timezone", "latitude", "longitude", "venue_type")} == {
        "name": "CSV Mall",
        "timezone": "Europe/Berlin",
        "latitude": 52.5,
        "longitude": 13.4,
        "venue_type": "1.1",
    }
    assert {k: mall[k] for k in ("tags", "country", "region", "city", "impressions_per_play")} == {
        "tags": ["premium", "indoor"],
        "country": "DE",
        "region": "BE",
        "city": "Berlin",
        "impressions_per_play": 2.5,
    }
    screens = {s["screen_id"]: s for s in mall["screens"]}
    assert {k: screens["m1"][k] for k in ("name", "width", "height", "orientation", "mime_types")} == {
        "name": "Entrance",
        "width": 1920,
        "height": 1080,
        "orientation": "landscape",
        "mime_types": ["video/mp4", "video/webm"],
    }
    assert (screens["m1"]["max_duration_seconds"], screens["m2"]["orientation"]) == (30, "portrait")
    assert screens["m2"]["mime_types"] is None
    station = get(http, live, "/api/v1/venues/csv-station").json()
    assert (station["name"], station["screens"], station["tags"]) == ("Station, main hall", [], [])


def test_a_csv_import_updates_what_exists_and_blank_cells_keep_values(
    live: LiveServer, http: httpx.Client
) -> None:
    assert import_csv(http, live, IMPORT.replace("csv-", "up-")).status_code == 200
    again = (
        "venue_id,city,screen_id,width,orientation\n"
        "up-mall,Potsdam,m1,1280,\n"
        "up-mall,,m3,640,square\n"
        "up-new,,,,\n"
    )
    missing_name = import_csv(http, live, again)
    assert missing_name.status_code == 400
    assert missing_name.json()["error"]["details"] == [
        {"line": 4, "column": "name", "code": "missing_value", "message": "a new venue needs a name"}
    ]
    updated = import_csv(http, live, again.replace("up-new,,,,", "up-station,,,,"))
    assert updated.json()["data"] == {
        "venues_created": 0,
        "venues_updated": 2,
        "screens_created": 1,
        "screens_updated": 1,
    }
    mall = get(http, live, "/api/v1/venues/up-mall").json()
    assert (mall["city"], mall["name"], mall["country"], mall["tags"]) == (
        "Potsdam",
        "CSV Mall",
        "DE",
        ["premium", "indoor"],
    )
    screens = {s["screen_id"]: s for s in mall["screens"]}
    assert (screens["m1"]["width"], screens["m1"]["height"], screens["m1"]["orientation"]) == (
        1280,
        1080,
        "landscape",
    )
    assert (screens["m3"]["width"], screens["m3"]["orientation"]) == (640, "square")
    assert set(screens) == {"m1", "m2", "m3"}


def test_a_bad_csv_is_refused_whole_with_every_problem_by_line_and_column(
    live: LiveServer, http: httpx.Client
) -> None:
    body = (
        "venue_id,name,timezone,latitude,longitude,country,tags,screen_id,width,orientation\n"
        "ok-venue,Fine,UTC,,,,,s1,100,\n"
        "bad-1,Bad,Mars/Olympus,91,10,XX,,s1,0,round\n"
        "\n"
        '"bad-2","Two\nlines",UTC,,,,,,,\n'
        "ok-venue,Other name,,,,,,s1,,\n"
        ",No id,UTC,,,,,,,\n"
        "bad-3,Three,UTC,,,,,,5,\n"
        "bad-4,Four,UTC,,,,,s1,10,,extra\n"
        "bad-5,Five,UTC,1,,,,,,\n"
    )
    response = import_csv(http, live, body)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("invalid_csv", "line 3: timezone")
    assert [(d["line"], d["column"], d["code"]) for d in error["details"]] == [
        (3, "timezone", "invalid_timezone"),
        (3, "latitude", "invalid_field"),
        (3, "country", "invalid_field"),
        (3, "width", "invalid_field"),
        (3, "orientation", "invalid_field"),
        (5, "name", "invalid_field"),
        (7, "name", "conflicting_value"),
        (7, "screen_id", "duplicate_screen"),
        (8, "venue_id", "missing_value"),
        (9, "screen_id", "missing_value"),
        (10, None, "too_many_values"),
        (11, "longitude", "invalid_field"),
    ]
    assert "12 problem(s)" in error["message"]
    assert get(http, live, "/api/v1/venues/ok-venue").status_code == 404


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ("", (1, None, "missing_header")),
        ("name,timezone\nx,UTC\n", (1, "venue_id", "missing_column")),
        ("venue_id,colour\nx,red\n", (1, "colour", "unknown_column")),
        ("venue_id,name,Name\nx,a,b\n", (1, "name", "duplicate_column")),
        ("venue_id,width\nx,5\n", (1, "screen_id", "missing_column")),
        ('venue_id,name\n"x,a\n', (2, None, "malformed_csv")),
        (b"venue_id,name\nx,ok\ny,caf\xe9\n", (3, None, "invalid_encoding")),
    ],
)
def test_a_csv_with_a_broken_header_or_encoding_is_refused(
    live: LiveServer, http: httpx.Client, body: str | bytes, detail: tuple[int, str | None, str]
) -> None:
    response = import_csv(http, live, body)
    assert response.status_code == 400, response.text
    details = response.json()["error"]["details"]
    assert (details[0]["line"], details[0]["column"], details[0]["code"]) == detail


def test_a_csv_import_needs_text_csv_in_utf8(live: LiveServer, http: httpx.Client) -> None:
    for content_type in ("application/json", "text/plain", "text/csv; charset=latin-1"):
        response = import_csv(http, live, "venue_id,name\nct,CT\n", content_type)
        assert error_of(response) == (415, "unsupported_media_type", "content-type")
    assert (
        import_csv(http, live, "\ufeffvenue_id,name\nct,CT\n", "text/csv; charset=UTF-8").status_code == 200
    )


def test_a_csv_import_is_limited_in_bytes_and_rows(live: LiveServer, http: httpx.Client) -> None:
    too_big = import_csv(http, live, "venue_id,name\n" + "x" * (5 * 1024 * 1024))
    assert (too_big.status_code, too_big.json()["error"]["code"]) == (413, "payload_too_large")
    too_many = import_csv(http, live, "venue_id,name\n" + "v,n\n" * 50_001)
    assert error_of(too_many) == (413, "payload_too_large", "body")
    assert get(http, live, "/api/v1/venues/v").status_code == 404


def test_a_csv_import_reaches_decisions_without_a_restart_and_is_documented(
    live: LiveServer, http: httpx.Client
) -> None:
    document = http.get(f"{live.url}/openapi.json").json()
    operation = document["paths"]["/api/v1/venues/import"]["post"]
    assert operation["requestBody"]["content"]["text/csv"]["schema"]["type"] == "string"
    assert {"400", "413", "415"} <= set(operation["responses"])
    assert ad_status(live, "csv-live") == 422, "production refuses a venue it does not know"
    assert import_csv(http, live, "venue_id,name\ncsv-live,Live\n").status_code == 200
    assert eventually(lambda: ad_status(live, "csv-live") in (200, 204))


def test_a_renamed_creative_shows_its_new_title_in_the_inline_vast_of_an_issued_ad_request(
    live: LiveServer, http: httpx.Client
) -> None:
    """The inline VAST renders each creative once per catalog snapshot: a change must reach it anyway."""
    assert live.keys
    player = {"Ssp-Key": live.keys.production}
    assert post(http, live, "/api/v1/venues", {"venue_id": "vast-title", "name": "V", "timezone": "UTC"})
    campaign = post(
        http, live, "/api/v1/campaigns", {**CAMPAIGN, "name": "title", "venue_ids": ["vast-title"]}
    )
    post(http, live, f"/api/v1/campaigns/{campaign.json()['id']}/creatives", {**CREATIVE, "name": "Old"})
    issued = http.post(
        f"{live.url}/api/v1/ad/request",
        headers=player,
        json={"venue_id": "vast-title", "play_time": play_time()},
    )
    assert issued.status_code == 200, issued.text
    ad_request_uuid = issued.json()["data"]["ad_request_uuid"]
    # Other tests' campaigns may fill this venue too: rename whichever creative the decision chose.
    record = http.get(f"{live.url}/api/v1/ad/request/{ad_request_uuid}", headers=player).json()["data"]
    campaign_id, creative_id = record["campaign_id"], record["creative_id"]
    creatives = get(http, live, f"/api/v1/campaigns/{campaign_id}").json()["creatives"]
    (name,) = [c["name"] for c in creatives if c["id"] == creative_id]

    def title() -> str:
        vast = http.get(f"{live.url}/api/v1/ad/vast/{ad_request_uuid}")
        assert vast.status_code == 200, vast.text
        return vast.text.split("<AdTitle>", 1)[1].split("</AdTitle>", 1)[0]

    assert title() == escape(name)
    path = f"/api/v1/campaigns/{campaign_id}/creatives/{creative_id}"
    assert patch(http, live, path, {"name": f"{name} & renamed"}).status_code == 200
    assert eventually(lambda: title() == escape(f"{name} & renamed"))


# A value of the wrong JSON type is refused as the schema types it, never converted (a string is no number).


TYPED_VENUE = {"venue_id": "typed", "name": "T"}
LISTING = {
    "/api/v1/advertisers": "/api/v1/advertisers",
    "/api/v1/campaigns": "/api/v1/campaigns",
    "/api/v1/campaigns/1/creatives": "/api/v1/campaigns/1",
    "/api/v1/venues": "/api/v1/venues",
    "/api/v1/venues/venue-1/screens": "/api/v1/venues/venue-1",
}
"""Where what a POST would have made shows up."""


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/v1/advertisers", {"name": 7}, "name"),
        ("/api/v1/campaigns", {**CAMPAIGN, "name": "typed", "weight": "5"}, "weight"),
        ("/api/v1/campaigns", {**CAMPAIGN, "name": "typed", "cpm": "2.5"}, "cpm"),
        ("/api/v1/campaigns", {**CAMPAIGN, "name": "typed", "start_at": str(NOW)}, "start_at"),
        (
            "/api/v1/campaigns",
            {**CAMPAIGN, "name": "typed", "caps": [{"period": "daily", "metric": "plays", "limit": "9"}]},
            "caps[0].limit",
        ),
        ("/api/v1/campaigns/1/creatives", {**CREATIVE, "width": "1920"}, "width"),
        ("/api/v1/campaigns/1/creatives", {**CREATIVE, "duration_seconds": "15"}, "duration_seconds"),
        ("/api/v1/venues", {**TYPED_VENUE, "latitude": "52.5", "longitude": 13.4}, "latitude"),
        ("/api/v1/venues", {**TYPED_VENUE, "impressions_per_play": "2"}, "impressions_per_play"),
        ("/api/v1/venues/venue-1/screens", {"screen_id": "typed", "width": "1920"}, "width"),
        ("/api/v1/venues/venue-1/screens", {"screen_id": 5}, "screen_id"),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_and_nothing_is_stored(
    live: LiveServer, http: httpx.Client, path: str, body: dict[str, object], field: str
) -> None:
    before = get(http, live, LISTING[path])
    assert before.status_code == 200, before.text
    response = post(http, live, path, body)
    assert error_of(response) == (400, "invalid_field", field), response.text
    assert get(http, live, LISTING[path]).json() == before.json()


@pytest.mark.parametrize(
    ("path", "change", "field"),
    [
        ("/api/v1/campaigns/1", {"weight": "2"}, "weight"),
        ("/api/v1/venues/venue-1", {"impressions_per_play": "3"}, "impressions_per_play"),
    ],
)
def test_a_patch_with_a_string_for_a_number_is_refused_and_changes_nothing(
    live: LiveServer, http: httpx.Client, path: str, change: dict[str, object], field: str
) -> None:
    before = get(http, live, path).json()
    assert error_of(patch(http, live, path, change)) == (400, "invalid_field", field)
    assert get(http, live, path).json() == before


def test_whole_numbers_still_pass_where_the_schema_says_number(live: LiveServer, http: httpx.Client) -> None:
    body = {"venue_id": "typed-ok", "name": "T", "latitude": 52, "longitude": 13, "impressions_per_play": 2}
    made = post(http, live, "/api/v1/venues", body)
    assert made.status_code == 201, made.text
    assert (made.json()["latitude"], made.json()["impressions_per_play"]) == (52.0, 2.0)


def test_a_body_that_is_not_an_object_is_an_invalid_body(live: LiveServer, http: httpx.Client) -> None:
    assert error_of(post(http, live, "/api/v1/advertisers", ["Acme"])) == (400, "invalid_body", None)


BODY_ENDPOINTS = [
    ("post", "/api/v1/advertisers"),
    ("post", "/api/v1/venues"),
    ("post", "/api/v1/campaigns"),
    ("patch", "/api/v1/campaigns/1"),
    ("patch", "/api/v1/venues/venue-1"),
    ("post", "/api/v1/venues/venue-1/screens"),
]


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
@pytest.mark.parametrize(
    "body",
    [b'{"name": "caf\xe9"}', b"\xff\xfe{}", b'{"name": "x"', b"not json"],
    ids=["latin-1", "bom-garbage", "cut-short", "not-json"],
)
def test_a_management_body_that_is_not_utf_8_json_is_400_invalid_json(
    live: LiveServer, http: httpx.Client, method: str, path: str, body: bytes
) -> None:
    headers = {**admin(live), "Content-Type": "application/json"}
    response = http.request(method.upper(), f"{live.url}{path}", headers=headers, content=body)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "invalid_json"
    assert response.json()["error"]["field"] == "body"


@pytest.mark.parametrize(("method", "path"), BODY_ENDPOINTS)
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_management_body_not_sent_as_json_is_415(
    live: LiveServer, http: httpx.Client, method: str, path: str, content_type: str | None
) -> None:
    headers = admin(live) if content_type is None else {**admin(live), "Content-Type": content_type}
    response = http.request(method.upper(), f"{live.url}{path}", headers=headers, content=b'{"name": "x"}')
    assert response.status_code == 415, response.text
    assert response.json()["error"]["code"] == "unsupported_media_type"
