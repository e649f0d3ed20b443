"""The buyer's VAST as adslot serves it: adslot's inline-layer pixels added, the rest left as bid."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import xmlschema

from adslot.demand.bidder import build_vast
from adslot.vast.buyer import NotVast, with_adslot_pixels, wrapper_to
from adslot.vast.urls import QUARTILE_EVENTS
from tests.vast.schema import VAST_DIR, schema_errors

BASE = "https://ads.example.test"
UUID = "01a244ca-8dc4-79e5-bc56-3cef445c4440"
OURS = f"{BASE}/api/v1/ad/callback/?ad_request_uuid={UUID}&layer=inline"
SAMPLES = sorted((VAST_DIR / "samples").glob("*.xml")) if (VAST_DIR / "samples").is_dir() else []
LINEAR_SAMPLES = [p for p in SAMPLES if "<Linear" in p.read_text(encoding="utf-8")]
_ADDED = re.compile(
    r"<Impression><!\[CDATA\[" + re.escape(BASE) + r"[^]]*\]\]></Impression>"
    r"|<Tracking event=\"\w+\"><!\[CDATA\[" + re.escape(BASE) + r"[^]]*\]\]></Tracking>"
)

_ADDED_EVENTS = re.compile(r"(?:(?<=</Duration>)|(?<=<Linear>))<TrackingEvents></TrackingEvents>")
"""Where adslot adds a TrackingEvents to a Linear that had none: right after its Duration or its start tag."""


def merged(markup: str) -> str:
    return with_adslot_pixels(markup, base_url=BASE, ad_request_uuid=UUID)


def linears(markup: str) -> int:
    return len(re.findall(r"<Linear[\s>]", markup))


@pytest.mark.parametrize("sample", LINEAR_SAMPLES, ids=lambda p: p.name)
def test_each_iab_linear_sample_gets_adslots_impression_and_quartiles_and_still_validates(
    sample: Path, vast_schema: xmlschema.XMLSchema
) -> None:
    original = sample.read_text(encoding="utf-8")
    served = merged(original)
    assert schema_errors(vast_schema, served) == schema_errors(vast_schema, original)
    assert served.count(OURS) == 1
    for event in QUARTILE_EVENTS:
        ours = f'<Tracking event="{event}"><![CDATA[{BASE}/api/v1/ad/tracking/video/?ad_request_uuid={UUID}'
        assert served.count(ours) == linears(original)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_the_buyers_markup_is_served_byte_for_byte_around_what_adslot_adds(sample: Path) -> None:
    original = sample.read_text(encoding="utf-8")
    served = merged(original)
    without = _ADDED_EVENTS.sub("", _ADDED.sub("", served))
    assert without == original


def test_the_test_bidders_creative_keeps_its_own_pixels_beside_adslots_and_validates(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    original = build_vast("http://127.0.0.1:9100", 1920, 1080, 15)
    served = merged(original)
    assert not schema_errors(vast_schema, served)
    assert served.count("<Impression>") == 2
    assert served.count("<Tracking ") == 10
    assert served.index(OURS) < served.index("http://127.0.0.1:9100/pixel/impression")


def test_a_linear_without_tracking_events_gets_them_after_its_duration(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    original = re.sub(r"<TrackingEvents>.*</TrackingEvents>", "", build_vast("http://b.test", 640, 360, 10))
    served = merged(original)
    assert not schema_errors(vast_schema, served)
    assert '</Duration><TrackingEvents><Tracking event="start">' in served


@pytest.mark.parametrize(
    ("markup", "why"),
    [
        ("not xml at all", "well-formed"),
        ("<VAST version='2.0'><Ad><InLine>", "well-formed"),
        ("<html><body>an ad</body></html>", "<html>"),
        ("<VAST version='2.0'/>", "no <Ad>"),
        ("<VAST version='2.0'><Ad id='1'><Other/></Ad></VAST>", "no <Ad>"),
    ],
)
def test_markup_that_is_not_one_vast_ad_is_refused(markup: str, why: str) -> None:
    with pytest.raises(NotVast, match=why):
        merged(markup)


def test_an_entity_expansion_bomb_is_refused_not_expanded() -> None:
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE VAST [<!ENTITY a "aaaaaaaaaa">'
        + "".join(
            f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + ']><VAST version="2.0"><Ad><InLine><AdSystem>&i;</AdSystem></InLine></Ad></VAST>'
    )
    with pytest.raises(NotVast):
        merged(bomb)


def test_a_bid_served_by_its_nurl_is_a_wrapper_to_it_with_adslots_pixels(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    served = wrapper_to(
        "https://buyer.test/vast?id=1&p=2",
        base_url=BASE,
        ad_request_uuid=UUID,
        ad_system_name="adslot",
        ad_system_version="1",
    )
    assert not schema_errors(vast_schema, served)
    assert "<VASTAdTagURI><![CDATA[https://buyer.test/vast?id=1&p=2]]></VASTAdTagURI>" in served
    assert served.count(OURS) == 1


@pytest.mark.parametrize(
    "empty", ["<TrackingEvents/>", "<TrackingEvents />", "<TrackingEvents></TrackingEvents>"]
)
def test_an_empty_tracking_events_gets_adslots_quartiles_inside_it_once(
    empty: str, vast_schema: xmlschema.XMLSchema
) -> None:
    original = re.sub(
        r"<TrackingEvents>.*</TrackingEvents>", empty, build_vast("http://b.test", 640, 360, 10)
    )
    served = merged(original)
    assert not schema_errors(vast_schema, served)
    assert served.count("<TrackingEvents") == 1
    inside = served[served.index("<TrackingEvents") : served.index("</TrackingEvents>")]
    assert inside.count("<Tracking event=") == 5


def test_blank_lines_before_the_declaration_are_tolerated_and_not_served(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    served = merged("\ufeff\n  " + build_vast("http://b.test", 640, 360, 10))
    assert served.startswith("<?xml")
    assert not schema_errors(vast_schema, served)
