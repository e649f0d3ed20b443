"""The URL shapes of the contract (spec section 4.2) that the VAST documents embed."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from adslot.vast.urls import EVENTS, QUARTILE_EVENTS, impression_url, tracking_url, vast_url

BASE = "https://ads.example.test/sandbox"
UUID = "01890a5d-ac96-774b-bcce-b302099a8057"


def test_quartile_events_are_the_five_video_milestones_in_play_order() -> None:
    assert QUARTILE_EVENTS == ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")


def test_events_are_impression_then_the_quartiles() -> None:
    assert EVENTS == ("impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete")


def test_vast_url_is_base_then_api_v1_ad_vast_uuid() -> None:
    assert vast_url(BASE, UUID) == f"https://ads.example.test/sandbox/api/v1/ad/vast/{UUID}"


def test_impression_url_is_the_callback_with_the_uuid_as_query() -> None:
    assert (
        impression_url(BASE, UUID)
        == f"https://ads.example.test/sandbox/api/v1/ad/callback/?ad_request_uuid={UUID}"
    )


def test_tracking_url_carries_uuid_then_event_in_the_query() -> None:
    assert (
        tracking_url(BASE, UUID, "midpoint")
        == f"https://ads.example.test/sandbox/api/v1/ad/tracking/video/?ad_request_uuid={UUID}&event=midpoint"
    )


def test_every_tracking_url_parses_to_its_own_uuid_and_event() -> None:
    for event in QUARTILE_EVENTS:
        parts = urlsplit(tracking_url(BASE, UUID, event))
        assert (parts.scheme, parts.netloc, parts.path) == (
            "https",
            "ads.example.test",
            "/sandbox/api/v1/ad/tracking/video/",
        )
        assert parse_qs(parts.query, strict_parsing=True) == {"ad_request_uuid": [UUID], "event": [event]}


def test_impression_url_parses_to_the_callback_path_and_uuid_only() -> None:
    parts = urlsplit(impression_url(BASE, UUID))
    assert parts.path == "/sandbox/api/v1/ad/callback/"
    assert parse_qs(parts.query, strict_parsing=True) == {"ad_request_uuid": [UUID]}


def test_urls_on_a_root_base_have_no_double_slash() -> None:
    base = "http://127.0.0.1:8000"
    for url in (vast_url(base, UUID), impression_url(base, UUID), tracking_url(base, UUID, "start")):
        assert "//" not in urlsplit(url).path
        assert url.startswith("http://127.0.0.1:8000/api/v1/ad/")
