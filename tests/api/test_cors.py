"""CORS on the player-facing paths (edge/cors.py), on both lanes: what a browser page on another origin needs
to call adslot, and that the console and the management and report API are never opened to it.

The hot lane's answers are read on raw sockets (tests/api/test_protocol.py's helpers); the same request with
its path percent-escaped is declined by the lane and answered through ASGI, so both lanes are compared.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from litestar.routes import HTTPRoute

from adslot.api.hot_routes import HOT_ROUTES
from adslot.api.http import build_litestar
from adslot.api.management import MANAGEMENT_CONTROLLERS
from adslot.api.reports import REPORT_CONTROLLERS
from adslot.edge.cors import ALLOW_HEADERS, EXPOSE_HEADERS, is_player_path
from adslot.environment import Environment
from adslot.settings import SettingsError, load_settings
from tests.api.test_protocol import _exchange, _get, _post
from tests.conftest import (
    PROD_VENUE,
    LiveServer,
    drop_schemas,
    free_port,
    make_settings,
    play_time,
    start_server,
)
from tests.contract.support import AD_REQUEST, issue

PLAYER = "http://player.example"
OTHER = "http://elsewhere.example"
LISTED = f"{PLAYER},https://screens.example:8443"
PREFLIGHT = (
    f"Origin: {PLAYER}",
    "Access-Control-Request-Method: POST",
    "Access-Control-Request-Headers: ssp-key,content-type",
)


def _options(path: str, *extra: str) -> bytes:
    return _get(path, *extra, method="OPTIONS")


def _escaped(path: str) -> str:
    """The same path with a character percent-escaped: the hot lane declines it, ASGI answers it."""
    head, _, query = path.partition("?")
    escaped = head.replace("/api/", "/%61pi/", 1)
    return f"{escaped}?{query}" if query else escaped


def _cors(headers: dict[str, str]) -> dict[str, str]:
    return {
        name: value for name, value in headers.items() if name.startswith("access-control-") or name == "vary"
    }


def _ad_request(live: LiveServer, path: str, *extra: str) -> bytes:
    body = json.dumps({"venue_id": PROD_VENUE, "play_time": play_time()})
    return _post(path, body, f"Ssp-Key: {live.keys.production}", *extra)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def listed(backend: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A seeded adslot that lets two origins in."""
    server, schemas = start_server(tmp_path_factory.mktemp("cors"), backend, ADSLOT_CORS_ORIGINS=LISTED)
    yield server
    server.stop()
    if schemas:
        drop_schemas(schemas)


@pytest.mark.parametrize(
    "path",
    [
        AD_REQUEST,
        "/ad/request",
        "/sandbox/api/v1/ad/request",
        "/api/v1/ad/request/0190c3f0-0000-7000-8000-000000000001/release",
        "/api/v1/ad/pop/batch",
        "/api/v1/ad/manifest",
        "/api/v1/ad/vast/0190c3f0-0000-7000-8000-000000000001",
        "/api/v1/ad/callback/",
        "/api/v1/ad/tracking/video/",
        "/sandbox/media/demo.mp4",
    ],
)
def test_a_preflight_on_a_player_path_allows_post_with_ssp_key_and_content_type_cached_for_a_day(
    live: LiveServer, path: str
) -> None:
    [(status, headers, body)] = _exchange(live, _options(path, *PREFLIGHT))
    assert status == 204 and body == b""
    assert headers["access-control-allow-origin"] == "*"
    assert headers["access-control-allow-methods"] == "GET, HEAD, POST"
    allowed = {h.strip().lower() for h in headers["access-control-allow-headers"].split(",")}
    assert {"ssp-key", "content-type", "x-request-id"} <= allowed
    assert headers["access-control-max-age"] == "86400"
    assert "vary" not in headers, "with any origin the answer is the same for every origin"


def test_both_lanes_answer_an_ad_request_with_the_same_cors_headers_exposing_the_uuid_and_expiry(
    live: LiveServer,
) -> None:
    origin = f"Origin: {PLAYER}"
    xml = AD_REQUEST + "?format=xml"
    lane, asgi = _exchange(live, _ad_request(live, xml, origin), _ad_request(live, _escaped(xml), origin))
    assert lane[0] == asgi[0] == 200
    assert lane[1]["x-ad-request-uuid"] and asgi[1]["x-ad-request-uuid"]
    assert (
        _cors(lane[1])
        == _cors(asgi[1])
        == {
            "access-control-allow-origin": "*",
            "access-control-expose-headers": EXPOSE_HEADERS.decode(),
        }
    )
    exposed = {h.strip() for h in lane[1]["access-control-expose-headers"].split(",")}
    assert {"X-Ad-Request-Uuid", "X-Ad-Request-Expired-At", "X-Request-Id", "Server-Timing"} <= exposed


def test_a_request_without_origin_gets_only_vary_origin_on_both_lanes(live: LiveServer) -> None:
    """A player that is no browser sends no Origin and needs no CORS header; Vary keeps a cache from handing
    its answer to a page."""
    lane, asgi = _exchange(live, _ad_request(live, AD_REQUEST), _ad_request(live, _escaped(AD_REQUEST)))
    assert lane[0] == asgi[0] == 200
    assert _cors(lane[1]) == _cors(asgi[1]) == {"vary": "Origin"}


def test_pixels_the_inline_vast_the_record_release_manifest_and_media_answer_cors(
    live: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    origin = f"Origin: {PLAYER}"
    hot = [
        f"/api/v1/ad/callback/?ad_request_uuid={ad}",
        f"/api/v1/ad/tracking/video/?ad_request_uuid={ad}&event=start",
        f"/api/v1/ad/vast/{ad}",
        "/api/v1/ad/vast/not-a-uuid",
    ]
    for path in hot:
        lane, asgi = _exchange(live, _get(path, origin), _get(_escaped(path), origin))
        assert lane[0] == asgi[0], path
        assert _cors(lane[1]) == _cors(asgi[1]) != {}, path
        assert lane[1]["access-control-allow-origin"] == "*"
    others = [
        _get(f"/api/v1/ad/request/{ad}", key, origin),
        _get(f"/api/v1/ad/manifest?venue_id={PROD_VENUE}", key, origin),
        _get("/sandbox/media/demo.mp4", origin),
        _get(f"/api/v1/ad/request/{ad}/release", key, origin, "Content-Length: 0", method="POST"),
    ]
    answers = _exchange(live, *others)
    assert [status for status, _, _ in answers] == [200, 200, 200, 409]  # played: it cannot be given back
    for _, headers, _ in answers:
        assert headers["access-control-allow-origin"] == "*"


def test_a_listed_origin_is_echoed_with_vary_origin_on_both_lanes(
    listed: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, listed)["ad_request_uuid"]
    pixel = f"/api/v1/ad/callback/?ad_request_uuid={ad}"
    for origin in (PLAYER, "https://screens.example:8443"):
        lane, asgi = _exchange(
            listed, _get(pixel, f"Origin: {origin}"), _get(_escaped(pixel), f"Origin: {origin}")
        )
        assert (
            _cors(lane[1])
            == _cors(asgi[1])
            == {
                "access-control-allow-origin": origin,
                "access-control-expose-headers": EXPOSE_HEADERS.decode(),
                "vary": "Origin",
            }
        )
    [(status, headers, _)] = _exchange(listed, _options(AD_REQUEST, *PREFLIGHT))
    assert status == 204
    assert headers["access-control-allow-origin"] == PLAYER and headers["vary"] == "Origin"
    assert headers["access-control-allow-headers"] == ALLOW_HEADERS.decode()


def test_an_origin_not_listed_gets_no_cors_header_and_its_preflight_is_refused_403(
    listed: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, listed)["ad_request_uuid"]
    pixel = f"/api/v1/ad/callback/?ad_request_uuid={ad}"
    lane, asgi, without = _exchange(
        listed, _get(pixel, f"Origin: {OTHER}"), _get(_escaped(pixel), f"Origin: {OTHER}"), _get(pixel)
    )
    for status, headers, _ in (lane, asgi, without):
        assert status == 200
        # Vary still: a cache must not give this answer to a listed origin.
        assert _cors(headers) == {"vary": "Origin"}
    preflight = [line.replace(PLAYER, OTHER) for line in PREFLIGHT]
    [(status, headers, body)] = _exchange(listed, _options(AD_REQUEST, *preflight))
    assert status == 403
    assert not any(name.startswith("access-control-") for name in headers)
    assert json.loads(body)["error"] == {
        "code": "origin_not_allowed",
        "message": "this origin may not call adslot from a browser",
        "field": "Origin",
    }


@pytest.mark.parametrize(
    "path",
    [
        "/console/sign-in",
        "/console/production/",
        "/api/v1/campaigns",
        "/api/v1/advertisers",
        "/sandbox/api/v1/venues",
        "/api/v1/reports/delivery",
        "/openapi.json",
        "/sandbox/playground",
    ],
)
def test_the_console_and_the_management_and_report_api_are_never_opened_to_other_origins(
    live: LiveServer, path: str
) -> None:
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    preflight = [*PREFLIGHT[:2], "Access-Control-Request-Headers: ssp-key"]
    get, options = _exchange(live, _get(path, key, f"Origin: {PLAYER}"), _options(path, *preflight))
    for status, headers, _ in (get, options):
        assert not any(name.startswith("access-control-") for name in headers), (path, status, headers)
        assert "x-request-id" in headers


def test_no_management_or_report_route_lies_under_a_player_path(tmp_path: Path) -> None:
    """A route added under a player path would be opened to every origin: only the player's may be there."""
    settings, _ = make_settings(tmp_path, "sqlite", free_port())
    app = build_litestar(Environment(settings, settings.environment("production")))
    players = {handler.handler_name for handler in HOT_ROUTES} | {"media", "pop_batch", "options_handler"}
    opened = {
        route.path: {handler.handler_name for handler in route.route_handlers}
        for route in app.routes
        if isinstance(route, HTTPRoute) and is_player_path(route.path)
    }
    assert "/api/v1/ad/request" in opened and "/media/{name:str}" in opened
    for path, handlers in opened.items():
        assert handlers <= players, path
    closed = [str(vars(controller)["path"]) for controller in (*MANAGEMENT_CONTROLLERS, *REPORT_CONTROLLERS)]
    assert "/api/v1/campaigns" in closed and "/api/v1/reports" in closed
    for path in closed:
        assert not is_player_path(path) and not is_player_path(path + "/"), path
    assert not is_player_path("/console") and not is_player_path("/api/v1/adx")


def test_with_cors_off_no_answer_carries_a_cors_header(
    backend: str, tmp_path: Path, http: httpx.Client
) -> None:
    server, schemas = start_server(tmp_path, backend, ADSLOT_CORS_ORIGINS="none")
    try:
        ad = issue(http, server)["ad_request_uuid"]
        pixel = f"/api/v1/ad/callback/?ad_request_uuid={ad}"
        answers = _exchange(
            server,
            _get(pixel, f"Origin: {PLAYER}"),
            _get(_escaped(pixel), f"Origin: {PLAYER}"),
            _options(AD_REQUEST, *PREFLIGHT),
        )
        for _, headers, _ in answers:
            assert _cors(headers) == {}
    finally:
        server.stop()
        if schemas:
            drop_schemas(schemas)


@pytest.mark.parametrize(
    ("raw", "origins"),
    [
        (None, ("*",)),
        ("*", ("*",)),
        ("", ()),
        ("none", ()),
        (
            "https://Player.example, http://127.0.0.1:8080",
            ("https://player.example", "http://127.0.0.1:8080"),
        ),
    ],
)
def test_cors_origins_are_read_as_any_none_or_a_list(raw: str | None, origins: tuple[str, ...]) -> None:
    environ = {} if raw is None else {"ADSLOT_CORS_ORIGINS": raw}
    assert load_settings(environ).cors_origins == origins


@pytest.mark.parametrize(
    "raw",
    [
        "https://player.example/",
        "player.example",
        "ftp://player.example",
        "*, https://a.example",
        "https://a:99999",
    ],
)
def test_a_cors_origin_that_is_not_an_origin_stops_the_start(raw: str) -> None:
    with pytest.raises(SettingsError, match="ADSLOT_CORS_ORIGINS"):
        load_settings({"ADSLOT_CORS_ORIGINS": raw})


def test_the_preflight_max_age_is_a_setting_bounded_to_a_day() -> None:
    assert load_settings({"ADSLOT_CORS_MAX_AGE_SECONDS": "600"}).cors_max_age_seconds == 600
    with pytest.raises(SettingsError, match="ADSLOT_CORS_MAX_AGE_SECONDS"):
        load_settings({"ADSLOT_CORS_MAX_AGE_SECONDS": "86401"})


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_preflight_then_ad_request_from_another_origin(live: LiveServer) -> None:
    """What a browser sends, by curl: the preflight, then the POST with its Origin."""
    preflight = subprocess.run(
        [
            "curl",
            "-si",
            "-X",
            "OPTIONS",
            f"{live.url}{AD_REQUEST}",
            "-H",
            f"Origin: {PLAYER}",
            "-H",
            "Access-Control-Request-Method: POST",
            "-H",
            "Access-Control-Request-Headers: ssp-key,content-type",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout.lower()
    assert preflight.startswith("http/1.1 204")
    assert "access-control-allow-origin: *" in preflight
    assert "access-control-allow-headers: content-type, ssp-key, x-request-id" in preflight
    assert "access-control-max-age: 86400" in preflight
    post = subprocess.run(
        [
            "curl",
            "-si",
            f"{live.url}{AD_REQUEST}",
            "-H",
            f"Origin: {PLAYER}",
            "-H",
            f"Ssp-Key: {live.keys.production}",  # type: ignore[union-attr]
            "-H",
            "Content-Type: application/json",
            "--data",
            json.dumps({"venue_id": PROD_VENUE, "play_time": play_time()}),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert post.startswith("HTTP/1.1 200")
    assert "access-control-allow-origin: *" in post
    assert '"vast_tag"' in post
