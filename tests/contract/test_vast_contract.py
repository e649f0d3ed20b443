"""The spec's VAST tag (sections 2.3, 4.2, 6), element by element, for both environments and both formats."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import httpx
import pytest

from adslot import __version__
from tests.conftest import LiveServer, play_time
from tests.contract.support import ENVIRONMENTS, QUARTILES, base_of, request_ad, venue_of

URL = re.compile(r"https?://")
CDATA_URL = re.compile(r"<!\[CDATA\[(https?://[^\]]*)\]\]>")


def vast_and_uuid(
    http: httpx.Client,
    live: LiveServer,
    env: str,
    fmt: str,
    screen_id: str | None = "screen-7",
    venue: str | None = None,
) -> tuple[str, str]:
    body: dict[str, object] = {"venue_id": venue or venue_of(env), "play_time": play_time()}
    if screen_id is not None:
        body["screen_id"] = screen_id
    response = request_ad(http, live, env=env, fmt=fmt, body=body)
    assert response.status_code == 200, response.text
    if fmt == "xml":
        return response.text, response.headers["x-ad-request-uuid"]
    data = response.json()["data"]
    return data["vast_tag"], data["ad_request_uuid"]


def only(parent: ET.Element, tag: str) -> ET.Element:
    found = parent.findall(tag)
    assert len(found) == 1, f"expected exactly one <{tag}> in <{parent.tag}>, found {len(found)}"
    return found[0]


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_wrapper_vast_has_the_spec_structure_element_by_element(
    live: LiveServer, http: httpx.Client, env: str, fmt: str
) -> None:
    base = base_of(live, env)
    vast, uuid_text = vast_and_uuid(http, live, env, fmt)
    root = ET.fromstring(vast)

    assert root.tag == "VAST" and root.attrib == {"version": "2.0"}
    assert [child.tag for child in root] == ["Ad", "Extension"], "Ad, then the custom-meta Extension"

    ad = only(root, "Ad")
    assert ad.attrib == {"id": uuid_text}
    assert [child.tag for child in ad] == ["Wrapper"]
    wrapper = only(ad, "Wrapper")
    assert [child.tag for child in wrapper] == ["AdSystem", "VASTAdTagURI", "Impression", "Creatives"]

    ad_system = only(wrapper, "AdSystem")
    assert ad_system.get("version") == __version__ and ad_system.get("version")
    assert ad_system.text == live.settings.ad_system_name and ad_system.text

    assert only(wrapper, "VASTAdTagURI").text == f"{base}/api/v1/ad/vast/{uuid_text}"
    assert only(wrapper, "Impression").text == f"{base}/api/v1/ad/callback/?ad_request_uuid={uuid_text}"

    creative = only(only(wrapper, "Creatives"), "Creative")
    linear = only(creative, "Linear")
    tracking_events = only(linear, "TrackingEvents")
    trackings = tracking_events.findall("Tracking")
    assert len(trackings) == len(list(tracking_events)) == 5
    assert [t.get("event") for t in trackings] == list(QUARTILES)
    for tracking in trackings:
        event = tracking.get("event")
        assert tracking.attrib == {"event": event}
        assert tracking.text == f"{base}/api/v1/ad/tracking/video/?ad_request_uuid={uuid_text}&event={event}"

    extension = root[1]
    assert extension.tag == "Extension" and extension.attrib == {"type": "custom-meta"}
    assert [child.tag for child in extension] == ["venue_id", "screen_id"]
    assert only(extension, "venue_id").text == venue_of(env)
    assert only(extension, "screen_id").text == "screen-7"


@pytest.mark.parametrize("fmt", ["json", "xml"])
@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_every_url_and_meta_value_in_the_wrapper_is_cdata(
    live: LiveServer, http: httpx.Client, env: str, fmt: str
) -> None:
    base = base_of(live, env)
    vast, uuid_text = vast_and_uuid(http, live, env, fmt)
    urls = CDATA_URL.findall(vast)
    assert len(URL.findall(vast)) == len(urls) == 7, (
        "VASTAdTagURI, Impression and five Tracking URLs, all CDATA"
    )
    assert all(url.startswith(f"{base}/api/v1/ad/") and uuid_text in url for url in urls)
    for tag in ("VASTAdTagURI", "Impression", "Tracking"):
        assert re.search(rf"<{tag}[^>]*><!\[CDATA\[", vast), tag
    assert f"<venue_id><![CDATA[{venue_of(env)}]]></venue_id>" in vast
    assert "<screen_id><![CDATA[screen-7]]></screen_id>" in vast


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_custom_meta_keeps_an_empty_screen_id_element_when_none_was_sent(
    live: LiveServer, http: httpx.Client, env: str
) -> None:
    vast, _ = vast_and_uuid(http, live, env, "json", screen_id=None)
    extension = ET.fromstring(vast).find("Extension")
    assert extension is not None
    assert [child.tag for child in extension] == ["venue_id", "screen_id"]
    assert extension.findtext("venue_id") == venue_of(env)
    assert (extension.findtext("screen_id") or "") == ""


def test_ids_with_markup_and_cdata_terminators_round_trip_through_the_vast(
    live: LiveServer, http: httpx.Client
) -> None:
    venue = "lobby <b>\"&' ]]> end"
    screen = "]]><Impression>http://evil.example/</Impression><![CDATA["
    vast, uuid_text = vast_and_uuid(http, live, "sandbox", "xml", screen_id=screen, venue=venue)
    root = ET.fromstring(vast)
    assert root.findtext("Extension/venue_id") == venue
    assert root.findtext("Extension/screen_id") == screen
    assert len(root.findall(".//Impression")) == 1
    assert root.findtext("Ad/Wrapper/Impression") == (
        f"{live.sandbox_url}/api/v1/ad/callback/?ad_request_uuid={uuid_text}"
    )


def test_sandbox_urls_use_the_sandbox_base_and_production_urls_do_not(
    live: LiveServer, http: httpx.Client
) -> None:
    sandbox_vast, _ = vast_and_uuid(http, live, "sandbox", "json")
    production_vast, _ = vast_and_uuid(http, live, "production", "json")
    assert all(url.startswith(live.sandbox_url + "/api/v1/") for url in CDATA_URL.findall(sandbox_vast))
    assert not any(url.startswith(live.sandbox_url) for url in CDATA_URL.findall(production_vast))
