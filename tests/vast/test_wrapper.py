"""The VAST 2.0 wrapper of an ad request: the spec's shape, the schema, escaping of player-supplied ids."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import xmlschema
from hypothesis import given, settings
from hypothesis import strategies as st

from adslot.vast.urls import QUARTILE_EVENTS, impression_url, tracking_url, vast_url
from adslot.vast.wrapper import EMPTY_VAST, XML_DECLARATION, build_wrapper, custom_meta
from tests.vast.schema import schema_errors

BASE = "https://ads.example.test/sandbox"
UUID = "01890a5d-ac96-774b-bcce-b302099a8057"


def wrapper(venue_id: str = "venue-1", screen_id: str | None = "screen-7", *, strict: bool = False) -> str:
    return build_wrapper(
        base_url=BASE,
        ad_request_uuid=UUID,
        venue_id=venue_id,
        screen_id=screen_id,
        ad_system_name="adslot",
        ad_system_version="0.1.0",
        schema_strict=strict,
    )


def parse(document: str) -> ET.Element:
    return ET.fromstring(document.encode("utf-8"))


def xml_char_or_replacement(ch: str) -> str:
    """What XML 1.0 (production [2] Char) lets through unchanged; anything else becomes U+FFFD."""
    cp = ord(ch)
    allowed = ch in "\t\n\r" or 0x20 <= cp <= 0xD7FF or 0xE000 <= cp <= 0xFFFD or 0x10000 <= cp <= 0x10FFFF
    return ch if allowed else "\ufffd"


# --- shape (spec section 2.3) ---------------------------------------------------------------------


def test_wrapper_starts_with_the_utf8_declaration_and_a_version_2_0_root() -> None:
    document = wrapper()
    root = parse(document)
    assert document.startswith(XML_DECLARATION)
    assert root.tag == "VAST"
    assert root.attrib == {"version": "2.0"}


def test_wrapper_ad_id_is_the_ad_request_uuid() -> None:
    ad = parse(wrapper()).find("Ad")
    assert ad is not None
    assert ad.attrib == {"id": UUID}


def test_wrapper_children_follow_the_schema_order() -> None:
    root = parse(wrapper())
    assert [child.tag for child in root.find("Ad/Wrapper")] == [
        "AdSystem",
        "VASTAdTagURI",
        "Impression",
        "Creatives",
    ]


def test_wrapper_ad_system_carries_name_and_version() -> None:
    ad_system = parse(wrapper()).find("Ad/Wrapper/AdSystem")
    assert ad_system is not None
    assert ad_system.text == "adslot"
    assert ad_system.attrib == {"version": "0.1.0"}


def test_wrapper_vast_ad_tag_uri_and_impression_are_cdata_urls_of_the_contract() -> None:
    document = wrapper()
    root = parse(document)
    assert root.findtext("Ad/Wrapper/VASTAdTagURI") == f"{BASE}/api/v1/ad/vast/{UUID}"
    assert root.findtext("Ad/Wrapper/Impression") == f"{BASE}/api/v1/ad/callback/?ad_request_uuid={UUID}"
    assert f"<VASTAdTagURI><![CDATA[{vast_url(BASE, UUID)}]]></VASTAdTagURI>" in document
    assert f"<Impression><![CDATA[{impression_url(BASE, UUID)}]]></Impression>" in document


def test_wrapper_has_exactly_one_impression() -> None:
    assert len(parse(wrapper()).findall("Ad/Wrapper/Impression")) == 1


def test_wrapper_tracks_the_five_quartile_events_in_order_with_their_urls() -> None:
    document = wrapper()
    rows = parse(document).findall("Ad/Wrapper/Creatives/Creative/Linear/TrackingEvents/Tracking")
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
        assert row.text == f"{BASE}/api/v1/ad/tracking/video/?ad_request_uuid={UUID}&event={event}"
        assert f"<![CDATA[{tracking_url(BASE, UUID, event)}]]>" in document
    assert tuple(row.get("event") for row in rows) == QUARTILE_EVENTS


def test_wrapper_default_puts_custom_meta_extension_directly_in_vast_after_ad() -> None:
    document = wrapper()
    root = parse(document)
    assert [child.tag for child in root] == ["Ad", "Extension"]
    extension = root[1]
    assert extension.attrib == {"type": "custom-meta"}
    assert [child.tag for child in extension] == ["venue_id", "screen_id"]
    assert extension.findtext("venue_id") == "venue-1"
    assert extension.findtext("screen_id") == "screen-7"
    assert root.find("Ad/Wrapper/Extensions") is None
    assert document.endswith(f"</Ad>{custom_meta('venue-1', 'screen-7')}</VAST>")


def test_wrapper_extension_ids_are_cdata() -> None:
    document = wrapper()
    assert "<venue_id><![CDATA[venue-1]]></venue_id>" in document
    assert "<screen_id><![CDATA[screen-7]]></screen_id>" in document


def test_wrapper_without_screen_id_has_an_empty_screen_id_element() -> None:
    document = wrapper(screen_id=None)
    extension = parse(document).find("Extension")
    assert extension is not None
    screen = extension.find("screen_id")
    assert screen is not None
    assert screen.text is None
    assert len(screen) == 0
    assert "<screen_id><![CDATA[]]></screen_id>" in document


def test_schema_strict_wrapper_moves_custom_meta_into_wrapper_extensions() -> None:
    root = parse(wrapper(strict=True))
    assert [child.tag for child in root] == ["Ad"]
    wrapper_element = root.find("Ad/Wrapper")
    assert wrapper_element is not None
    assert [child.tag for child in wrapper_element][-1] == "Extensions"
    extensions = wrapper_element.findall("Extensions/Extension")
    assert len(extensions) == 1
    assert extensions[0].attrib == {"type": "custom-meta"}
    assert extensions[0].findtext("venue_id") == "venue-1"
    assert extensions[0].findtext("screen_id") == "screen-7"


def test_schema_strict_wrapper_differs_from_default_only_by_where_the_extension_sits() -> None:
    meta = custom_meta("venue-1", "screen-7")
    default = wrapper()
    strict = wrapper(strict=True)
    moved = default.replace(meta, "").replace("</Wrapper>", f"<Extensions>{meta}</Extensions></Wrapper>")
    assert strict == moved


def test_empty_vast_is_the_no_ad_document_of_vast_2_0() -> None:
    root = parse(EMPTY_VAST)
    assert root.tag == "VAST"
    assert root.attrib == {"version": "2.0"}
    assert len(root) == 0


# --- the IAB 2.0.1 schema -------------------------------------------------------------------------


def test_default_wrapper_fails_the_schema(vast_schema: xmlschema.XMLSchema) -> None:
    errors = schema_errors(vast_schema, wrapper())
    assert errors, "the spec's placement of Extension directly in VAST is not allowed by the 2.0.1 schema"
    assert all(error.startswith("/VAST:") and "'Extension'" in error for error in errors), errors


def test_default_wrapper_fails_the_schema_only_because_of_the_spec_extension(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    meta = custom_meta("venue-1", "screen-7")
    document = wrapper()
    assert document.count(meta) == 1
    assert schema_errors(vast_schema, document.replace(meta, "")) == []


def test_default_wrapper_without_screen_id_fails_the_schema_only_because_of_the_spec_extension(
    vast_schema: xmlschema.XMLSchema,
) -> None:
    meta = custom_meta("venue-1", None)
    document = wrapper(screen_id=None)
    assert document.count(meta) == 1
    assert schema_errors(vast_schema, document.replace(meta, "")) == []


def test_schema_strict_wrapper_validates_as_is(vast_schema: xmlschema.XMLSchema) -> None:
    assert schema_errors(vast_schema, wrapper(strict=True)) == []


def test_schema_strict_wrapper_without_screen_id_validates(vast_schema: xmlschema.XMLSchema) -> None:
    assert schema_errors(vast_schema, wrapper(screen_id=None, strict=True)) == []


def test_schema_rejects_a_wrapper_without_impression(vast_schema: xmlschema.XMLSchema) -> None:
    """The validator is not vacuous: breaking the schema's required Impression is reported."""
    document = wrapper(strict=True)
    impression = f"<Impression><![CDATA[{impression_url(BASE, UUID)}]]></Impression>"
    assert impression in document
    assert schema_errors(vast_schema, document.replace(impression, ""))


def test_empty_vast_validates(vast_schema: xmlschema.XMLSchema) -> None:
    assert schema_errors(vast_schema, EMPTY_VAST) == []


# --- escaping of player-supplied ids --------------------------------------------------------------

TRICKY = [
    "]]>",
    "]]",
    ">",
    "<![CDATA[",
    "</venue_id>",
    "<injected/>",
    "</Extension><Ad id='x'/>",
    "<",
    "&",
    "&amp;",
    "&#0;",
    '"',
    "'",
    "\r",
    "\r\n",
    "\n",
    "\t",
    "\x00",
    "\x08",
    "\x0b",
    "\x1f",
    "\x7f",
    "\x85",
    "\ud800",
    "\udfff",
    "\ufffe",
    "\uffff",
    "\ufffd",
    "\u2028",
    "é",
    "日本",
    "\U0001f600",
    " ",
]
ANY_CHAR = st.characters(exclude_categories=())  # every code point, surrogates included
ids = st.lists(st.one_of(st.sampled_from(TRICKY), st.text(ANY_CHAR, max_size=8)), max_size=12).map("".join)

WRAPPER_TAGS = [
    "VAST",
    "Ad",
    "Wrapper",
    "AdSystem",
    "VASTAdTagURI",
    "Impression",
    "Creatives",
    "Creative",
    "Linear",
    "TrackingEvents",
    *["Tracking"] * 5,
    "Extension",
    "venue_id",
    "screen_id",
]


@given(venue_id=ids, screen_id=ids)
@settings(max_examples=300, deadline=None)
def test_any_venue_and_screen_id_round_trip_through_the_wrapper_without_injection(
    venue_id: str, screen_id: str
) -> None:
    root = parse(wrapper(venue_id, screen_id))
    assert sorted(element.tag for element in root.iter()) == sorted(WRAPPER_TAGS)
    assert [child.tag for child in root] == ["Ad", "Extension"]
    extension = root[1]
    assert extension.attrib == {"type": "custom-meta"}
    assert [child.tag for child in extension] == ["venue_id", "screen_id"]
    for name, sent in (("venue_id", venue_id), ("screen_id", screen_id)):
        element = extension.find(name)
        assert element is not None
        assert len(element) == 0
        assert element.attrib == {}
        assert (element.text or "") == "".join(map(xml_char_or_replacement, sent))


@given(venue_id=ids, screen_id=ids)
@settings(max_examples=60, deadline=None)
def test_any_venue_and_screen_id_keep_the_schema_strict_wrapper_valid(
    vast_schema: xmlschema.XMLSchema, venue_id: str, screen_id: str
) -> None:
    document = wrapper(venue_id, screen_id, strict=True)
    assert schema_errors(vast_schema, document) == []
    extension = parse(document).find("Ad/Wrapper/Extensions/Extension")
    assert extension is not None
    assert (extension.findtext("venue_id") or "") == "".join(map(xml_char_or_replacement, venue_id))
    assert (extension.findtext("screen_id") or "") == "".join(map(xml_char_or_replacement, screen_id))


def test_forbidden_control_characters_in_ids_become_exactly_one_replacement_character_each() -> None:
    extension = parse(wrapper("a\x00b\x1fc\ufffe", "\x0b\x0c")).find("Extension")
    assert extension is not None
    assert extension.findtext("venue_id") == "a\ufffdb\ufffdc\ufffd"
    assert extension.findtext("screen_id") == "\ufffd\ufffd"


def test_cdata_terminator_in_venue_id_cannot_close_the_section() -> None:
    extension = parse(wrapper("x]]><injected/>", "]]>")).find("Extension")
    assert extension is not None
    assert extension.findtext("venue_id") == "x]]><injected/>"
    assert extension.findtext("screen_id") == "]]>"
    assert extension.find(".//injected") is None


def test_carriage_returns_in_ids_survive_xml_line_end_normalization() -> None:
    extension = parse(wrapper("a\rb\r\nc", "\r")).find("Extension")
    assert extension is not None
    assert extension.findtext("venue_id") == "a\rb\r\nc"
    assert extension.findtext("screen_id") == "\r"
