"""The inline VAST that the wrapper points at: the chosen creative, valid against the IAB 2.0.1 schema."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pytest
import xmlschema
from hypothesis import given
from hypothesis import strategies as st

from adslot.vast.inline import INLINE, InlineCreative, MediaFile, build_inline, duration
from adslot.vast.urls import impression_url, tracking_url
from adslot.vast.wrapper import XML_DECLARATION
from tests.vast.schema import schema_errors

BASE = "https://ads.example.test"
UUID = "01890a5d-ac96-774b-bcce-b302099a8057"


def creative(
    duration_seconds: int = 15,
    bitrate_kbps: int | None = 4000,
    *,
    title: str = "Acme 15s",
    url: str = "https://cdn.example.test/acme.mp4?a=1&b=2",
) -> InlineCreative:
    return InlineCreative(
        creative_id=42,
        title=title,
        duration_seconds=duration_seconds,
        media=MediaFile(url=url, mime_type="video/mp4", width=1920, height=1080, bitrate_kbps=bitrate_kbps),
    )


def inline(item: InlineCreative | None = None) -> str:
    return build_inline(
        base_url=BASE,
        ad_request_uuid=UUID,
        creative=item or creative(),
        ad_system_name="adslot",
        ad_system_version="0.1.0",
    )


def parse(document: str) -> ET.Element:
    return ET.fromstring(document.encode("utf-8"))


# --- duration (hh:mm:ss, the schema's xs:time) ----------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "00:00:00"),
        (1, "00:00:01"),
        (59, "00:00:59"),
        (60, "00:01:00"),
        (61, "00:01:01"),
        (599, "00:09:59"),
        (3599, "00:59:59"),
        (3600, "01:00:00"),
        (3661, "01:01:01"),
        (36000, "10:00:00"),
        (86399, "23:59:59"),
    ],
)
def test_duration_formats_seconds_as_zero_padded_hh_mm_ss(seconds: int, expected: str) -> None:
    assert duration(seconds) == expected


@pytest.mark.parametrize("seconds", [-1, -3600])
def test_duration_of_negative_seconds_is_zero(seconds: int) -> None:
    assert duration(seconds) == "00:00:00"


@given(st.integers(min_value=0, max_value=86399))
def test_duration_within_a_day_is_hh_mm_ss_and_reads_back_as_the_same_seconds(seconds: int) -> None:
    formatted = duration(seconds)
    match = re.fullmatch(r"(\d\d):([0-5]\d):([0-5]\d)", formatted)
    assert match is not None, formatted
    hours, minutes, secs = (int(part) for part in match.groups())
    assert hours < 24
    assert hours * 3600 + minutes * 60 + secs == seconds


# --- shape ----------------------------------------------------------------------------------------


def test_inline_is_a_version_2_0_vast_whose_ad_id_is_the_ad_request_uuid() -> None:
    document = inline()
    root = parse(document)
    assert document.startswith(XML_DECLARATION)
    assert root.tag == "VAST"
    assert root.attrib == {"version": "2.0"}
    ad = root.find("Ad")
    assert ad is not None
    assert ad.attrib == {"id": UUID}


def test_inline_children_follow_the_schema_order() -> None:
    assert [child.tag for child in parse(inline()).find("Ad/InLine")] == [
        "AdSystem",
        "AdTitle",
        "Impression",
        "Creatives",
    ]


def test_inline_carries_ad_system_and_the_creative_title() -> None:
    root = parse(inline())
    ad_system = root.find("Ad/InLine/AdSystem")
    assert ad_system is not None
    assert ad_system.text == "adslot"
    assert ad_system.attrib == {"version": "0.1.0"}
    assert root.findtext("Ad/InLine/AdTitle") == "Acme 15s"


def test_inline_title_with_markup_is_escaped_text() -> None:
    root = parse(inline(creative(title='Tom & Jerry <b>"50%"</b> ]]>')))
    title = root.find("Ad/InLine/AdTitle")
    assert title is not None
    assert title.text == 'Tom & Jerry <b>"50%"</b> ]]>'
    assert len(title) == 0


def test_inline_pixels_are_the_contract_urls_marked_as_inline_layer() -> None:
    document = inline()
    root = parse(document)
    assert INLINE == "&layer=inline"
    assert root.findtext("Ad/InLine/Impression") == impression_url(BASE, UUID) + "&layer=inline"
    rows = root.findall("Ad/InLine/Creatives/Creative/Linear/TrackingEvents/Tracking")
    assert [row.get("event") for row in rows] == [
        "start",
        "firstQuartile",
        "midpoint",
        "thirdQuartile",
        "complete",
    ]
    for row in rows:
        event = row.get("event")
        assert event is not None
        assert row.text == tracking_url(BASE, UUID, event) + "&layer=inline"
        assert f"<![CDATA[{tracking_url(BASE, UUID, event)}&layer=inline]]>" in document


def test_inline_linear_has_duration_tracking_and_the_media_file() -> None:
    root = parse(inline(creative(15, 4000)))
    creative_element = root.find("Ad/InLine/Creatives/Creative")
    assert creative_element is not None
    assert creative_element.attrib == {"id": "42"}
    linear = creative_element.find("Linear")
    assert linear is not None
    assert [child.tag for child in linear] == ["Duration", "TrackingEvents", "MediaFiles"]
    assert linear.findtext("Duration") == "00:00:15"
    media = linear.findall("MediaFiles/MediaFile")
    assert len(media) == 1
    assert media[0].attrib == {
        "delivery": "progressive",
        "type": "video/mp4",
        "width": "1920",
        "height": "1080",
        "bitrate": "4000",
    }
    assert media[0].text == "https://cdn.example.test/acme.mp4?a=1&b=2"


def test_inline_media_file_without_bitrate_has_no_bitrate_attribute() -> None:
    media = parse(inline(creative(15, None))).find("Ad/InLine/Creatives/Creative/Linear/MediaFiles/MediaFile")
    assert media is not None
    assert "bitrate" not in media.attrib


def test_inline_media_url_is_cdata() -> None:
    assert "<![CDATA[https://cdn.example.test/acme.mp4?a=1&b=2]]></MediaFile>" in inline()


def test_inline_media_url_with_cdata_terminator_round_trips() -> None:
    url = "https://cdn.example.test/x.mp4?q=]]><Ad/>"
    media = parse(inline(creative(url=url))).find("Ad/InLine/Creatives/Creative/Linear/MediaFiles/MediaFile")
    assert media is not None
    assert media.text == url
    assert len(media) == 0


# --- the IAB 2.0.1 schema -------------------------------------------------------------------------


@pytest.mark.parametrize("bitrate_kbps", [None, 4000], ids=["no-bitrate", "bitrate"])
@pytest.mark.parametrize(
    ("seconds", "expected"),
    [(1, "00:00:01"), (59, "00:00:59"), (3600, "01:00:00")],
    ids=["1s", "59s", "3600s"],
)
def test_inline_validates_against_the_vast_2_0_1_schema(
    vast_schema: xmlschema.XMLSchema, seconds: int, expected: str, bitrate_kbps: int | None
) -> None:
    document = inline(creative(seconds, bitrate_kbps))
    assert schema_errors(vast_schema, document) == []
    assert parse(document).findtext("Ad/InLine/Creatives/Creative/Linear/Duration") == expected


def test_inline_with_markup_in_title_and_url_validates(vast_schema: xmlschema.XMLSchema) -> None:
    item = creative(title="A & B <c> \"d\" 'e' ]]>", url="https://cdn.example.test/a.mp4?x=1&y=]]>")
    assert schema_errors(vast_schema, inline(item)) == []


def test_schema_rejects_an_inline_without_duration(vast_schema: xmlschema.XMLSchema) -> None:
    """The validator is not vacuous: Linear requires Duration."""
    document = inline()
    assert "<Duration>00:00:15</Duration>" in document
    assert schema_errors(vast_schema, document.replace("<Duration>00:00:15</Duration>", ""))
