"""The URLs inside the VAST (spec 4.2, 6): impression and tracking pixels, the record, inline VAST."""

from __future__ import annotations

import time
import uuid
import xml.etree.ElementTree as ET

import httpx
import pytest

from tests.conftest import LiveServer
from tests.contract.support import (
    ENVIRONMENTS,
    QUARTILES,
    assert_empty_vast_error,
    assert_error,
    base_of,
    fire,
    issue,
    key_of,
    record_of,
)

EVENTS = ("impression", *QUARTILES)


def assert_fired(response: httpx.Response, uuid_text: str, event: str, result: str) -> None:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["cache-control"] == "no-store"
    assert response.json() == {
        "status": 200,
        "data": {"ad_request_uuid": uuid_text, "event": event, "result": result},
    }


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_impression_and_each_tracking_event_count_once_then_answer_duplicate(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    base = base_of(live, env)
    uuid_text = issue(http, live, env)["ad_request_uuid"]
    started = int(time.time())
    for event in EVENTS:
        assert_fired(fire(http, base, uuid_text, event), uuid_text, event, "counted")
    for event in EVENTS:
        assert_fired(fire(http, base, uuid_text, event), uuid_text, event, "duplicate")
    record = record_of(http, live, uuid_text, env)
    assert record["duplicate_count"] == len(EVENTS)
    assert record["late_count"] == 0
    assert set(record["events"]) == set(EVENTS)
    for event in EVENTS:
        assert started <= record["events"][event] <= int(time.time()), event


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_exact_urls_of_the_vast_tag_are_the_ones_that_count(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    vast = ET.fromstring(issue(http, live, env)["vast_tag"])
    uuid_text = vast.find("Ad").get("id")  # type: ignore[union-attr]
    impression = vast.findtext("Ad/Wrapper/Impression")
    assert impression
    assert_fired(http.get(impression), uuid_text, "impression", "counted")
    for tracking in vast.iterfind("Ad/Wrapper/Creatives/Creative/Linear/TrackingEvents/Tracking"):
        assert tracking.text
        assert_fired(http.get(tracking.text), uuid_text, tracking.get("event"), "counted")
    events = record_of(http, live, uuid_text, env)["events"]
    assert all(events[event] is not None for event in EVENTS)


def test_pixels_answer_head_requests_with_no_body_and_count_them(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid_text = issue(http, live)["ad_request_uuid"]
    for event in EVENTS:
        response = fire(http, live.url, uuid_text, event, method="HEAD")
        assert response.status_code == 200
        assert response.content == b""
    record = record_of(http, live, uuid_text)
    assert all(record["events"][event] is not None for event in EVENTS)
    assert record["state"] == "played"
    assert_fired(fire(http, live.url, uuid_text, "midpoint"), uuid_text, "midpoint", "duplicate")
    assert fire(http, live.url, uuid_text, "complete", method="HEAD").status_code == 200
    assert record_of(http, live, uuid_text)["duplicate_count"] == 2


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_record_moves_from_issued_to_played_with_the_impression(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    data = issue(http, live, env, screen_id="screen-r")
    uuid_text = data["ad_request_uuid"]
    record = record_of(http, live, uuid_text, env)
    assert record["state"] == "issued"
    assert record["ad_request_uuid"] == uuid_text
    assert (record["venue_id"], record["screen_id"]) == (data["venue_id"], "screen-r")
    assert record["ad_request_expired_at"] == data["ad_request_expired_at"]
    assert record["events"] == dict.fromkeys(EVENTS)
    assert (record["duplicate_count"], record["late_count"]) == (0, 0)

    fire(http, base_of(live, env), uuid_text, "start")
    record = record_of(http, live, uuid_text, env)
    assert record["state"] == "issued", "only the impression makes it played"
    assert record["events"]["start"] is not None and record["events"]["impression"] is None

    fire(http, base_of(live, env), uuid_text, "impression")
    record = record_of(http, live, uuid_text, env)
    assert record["state"] == "played"
    assert record["events"]["impression"] is not None


def test_record_lookup_is_refused_to_another_account_with_404(live: LiveServer, http: httpx.Client) -> None:
    assert live.keys
    uuid_text = issue(http, live)["ad_request_uuid"]
    response = http.get(
        f"{live.url}/api/v1/ad/request/{uuid_text}", headers={"Ssp-Key": live.keys.other_account}
    )
    assert_error(response, 404, "unknown_ad_request", "ad_request_uuid")
    same_account = http.get(
        f"{live.url}/api/v1/ad/request/{uuid_text}", headers={"Ssp-Key": live.keys.production}
    )
    assert same_account.status_code == 200


def test_record_lookup_answers_404_for_an_unknown_uuid(live: LiveServer, http: httpx.Client) -> None:
    response = http.get(
        f"{live.url}/api/v1/ad/request/{uuid.uuid4()}", headers={"Ssp-Key": key_of(live, "production")}
    )
    assert_error(response, 404, "unknown_ad_request", "ad_request_uuid")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_inline_vast_of_the_wrapper_uri_carries_inline_ad_with_media_file(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    base = base_of(live, env)
    data = issue(http, live, env)
    uuid_text = data["ad_request_uuid"]
    wrapper_uri = ET.fromstring(data["vast_tag"]).findtext("Ad/Wrapper/VASTAdTagURI")
    assert wrapper_uri == f"{base}/api/v1/ad/vast/{uuid_text}"
    response = http.get(wrapper_uri)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/xml")
    assert "x-adslot-error" not in response.headers
    root = ET.fromstring(response.content)
    assert root.tag == "VAST" and root.get("version") == "2.0"
    assert root.find("Ad").get("id") == uuid_text  # type: ignore[union-attr]
    inline = root.find("Ad/InLine")
    assert inline is not None and root.find("Ad/Wrapper") is None
    assert inline.findtext("AdSystem") == live.settings.ad_system_name
    media = inline.findall("Creatives/Creative/Linear/MediaFiles/MediaFile")
    assert len(media) == 1
    assert media[0].get("type") == "video/mp4"
    assert int(media[0].get("width", "0")) > 0 and int(media[0].get("height", "0")) > 0
    assert (media[0].text or "").startswith(("http://", "https://"))
    if env == "production":
        assert media[0].text == "https://cdn.example.test/acme.mp4"
        assert inline.findtext("Creatives/Creative/Linear/Duration") == "00:00:15"
    trackings = inline.findall("Creatives/Creative/Linear/TrackingEvents/Tracking")
    assert [t.get("event") for t in trackings] == list(QUARTILES)


def test_inline_vast_pixels_echo_the_wrapper_fires_without_counting_twice(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid_text = issue(http, live)["ad_request_uuid"]
    inline = ET.fromstring(http.get(f"{live.url}/api/v1/ad/vast/{uuid_text}").content)
    inline_impression = inline.findtext("Ad/InLine/Impression")
    assert inline_impression and inline_impression.endswith("&layer=inline")
    assert_fired(fire(http, live.url, uuid_text, "impression"), uuid_text, "impression", "counted")
    counted_at = record_of(http, live, uuid_text)["events"]["impression"]
    assert_fired(http.get(inline_impression), uuid_text, "impression", "echo")
    assert_fired(http.get(inline_impression), uuid_text, "impression", "duplicate")
    record = record_of(http, live, uuid_text)
    assert record["events"]["impression"] == counted_at
    assert record["duplicate_count"] == 1

    start = inline.find("Ad/InLine/Creatives/Creative/Linear/TrackingEvents/Tracking[@event='start']")
    assert start is not None and start.text
    assert_fired(http.get(start.text), uuid_text, "start", "counted")
    assert_fired(fire(http, live.url, uuid_text, "start"), uuid_text, "start", "echo")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_inline_vast_of_an_unknown_uuid_is_404_empty_vast(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    response = http.get(f"{base_of(live, env)}/api/v1/ad/vast/{uuid.uuid4()}")
    assert_empty_vast_error(response, 404, "unknown_ad_request")


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_inline_vast_of_a_malformed_uuid_is_400_empty_vast(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    response = http.get(f"{base_of(live, env)}/api/v1/ad/vast/not-a-uuid")
    assert_empty_vast_error(response, 400, "malformed_ad_request_uuid")


def test_an_ad_request_of_one_environment_is_unknown_to_the_other(
    live: LiveServer, http: httpx.Client
) -> None:
    for env, other in (("production", "sandbox"), ("sandbox", "production")):
        uuid_text = issue(http, live, env)["ad_request_uuid"]
        other_base = base_of(live, other)
        assert_error(
            fire(http, other_base, uuid_text, "impression"), 404, "unknown_ad_request", "ad_request_uuid"
        )
        assert_error(fire(http, other_base, uuid_text, "start"), 404, "unknown_ad_request", "ad_request_uuid")
        assert_empty_vast_error(
            http.get(f"{other_base}/api/v1/ad/vast/{uuid_text}"), 404, "unknown_ad_request"
        )
        assert record_of(http, live, uuid_text, env)["events"] == dict.fromkeys(EVENTS)
