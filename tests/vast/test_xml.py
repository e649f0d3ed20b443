"""The escaping helpers every VAST value goes through: no value can change the document's shape."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adslot.vast.xml import attr, cdata, text, xml_safe

ANY_CHAR = st.characters(exclude_categories=())  # every code point, surrogates included
MARKUP = ["]]>", "<![CDATA[", "<", ">", "&", '"', "'", "\r", "\r\n", "\n", "\t", "\x00", "\ud800", "\uffff"]
values = st.lists(st.one_of(st.sampled_from(MARKUP), st.text(ANY_CHAR, max_size=8)), max_size=12).map("".join)

FORBIDDEN = [chr(cp) for cp in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0xFFFE, 0xFFFF]] + [
    "\ud800",
    "\udbff",
    "\udc00",
    "\udfff",
]
ALLOWED = [
    "\t",
    "\n",
    "\r",
    " ",
    "~",
    "\x7f",
    "\x85",
    "\x9f",
    "\ud7ff",
    "\ue000",
    "\ufffd",
    "\U00010000",
    "\U0010ffff",
]


def expected_text(value: str) -> str:
    """XML 1.0 production [2] Char, written out independently of the code under test."""

    def one(ch: str) -> str:
        cp = ord(ch)
        ok = ch in "\t\n\r" or 0x20 <= cp <= 0xD7FF or 0xE000 <= cp <= 0xFFFD or 0x10000 <= cp <= 0x10FFFF
        return ch if ok else "\ufffd"

    return "".join(map(one, value))


def element(body: str) -> ET.Element:
    return ET.fromstring(f"<r>{body}</r>".encode())


# --- xml_safe -------------------------------------------------------------------------------------


@pytest.mark.parametrize("ch", FORBIDDEN, ids=[f"U+{ord(c):04X}" for c in FORBIDDEN])
def test_xml_safe_replaces_each_character_xml_forbids_with_one_replacement_character(ch: str) -> None:
    assert xml_safe(f"a{ch}b") == "a\ufffdb"


@pytest.mark.parametrize("ch", ALLOWED, ids=[f"U+{ord(c):04X}" for c in ALLOWED])
def test_xml_safe_keeps_characters_xml_allows(ch: str) -> None:
    assert xml_safe(f"a{ch}b") == f"a{ch}b"


@given(values)
def test_xml_safe_preserves_length_and_matches_the_xml_char_production(value: str) -> None:
    safe = xml_safe(value)
    assert len(safe) == len(value)
    assert safe == expected_text(value)
    safe.encode("utf-8")  # no lone surrogate survives


# --- cdata ----------------------------------------------------------------------------------------


def test_cdata_wraps_plain_text_in_one_section() -> None:
    assert cdata("https://a.test/?x=1&y=<2>") == "<![CDATA[https://a.test/?x=1&y=<2>]]>"


def test_cdata_of_empty_string_is_an_empty_section() -> None:
    assert cdata("") == "<![CDATA[]]>"


def test_cdata_splits_a_terminator_across_two_sections() -> None:
    assert cdata("a]]>b") == "<![CDATA[a]]]]><![CDATA[>b]]>"
    assert element(cdata("a]]>b")).text == "a]]>b"


def test_cdata_keeps_a_carriage_return_as_a_character_reference_between_sections() -> None:
    assert cdata("a\rb") == "<![CDATA[a]]>&#13;<![CDATA[b]]>"
    assert element(cdata("a\r\nb")).text == "a\r\nb"


@given(values)
def test_cdata_round_trips_any_text_as_the_only_content_of_its_element(value: str) -> None:
    parsed = element(cdata(value))
    assert len(parsed) == 0
    assert (parsed.text or "") == expected_text(value)


# --- text -----------------------------------------------------------------------------------------


def test_text_escapes_markup_characters() -> None:
    assert text("a & b < c > d") == "a &amp; b &lt; c &gt; d"


def test_text_escapes_an_existing_entity_again() -> None:
    assert text("&amp;") == "&amp;amp;"


def test_text_encodes_carriage_return_as_a_character_reference() -> None:
    assert text("a\rb") == "a&#13;b"


def test_text_leaves_quotes_alone() -> None:
    assert text("\"'") == "\"'"


@given(values)
def test_text_round_trips_any_text_as_element_content(value: str) -> None:
    parsed = element(text(value))
    assert len(parsed) == 0
    assert (parsed.text or "") == expected_text(value)


# --- attr -----------------------------------------------------------------------------------------


def test_attr_escapes_double_quotes_and_markup() -> None:
    assert attr('a"b<c>&') == "a&quot;b&lt;c&gt;&amp;"


def test_attr_encodes_whitespace_that_attribute_normalization_would_turn_into_spaces() -> None:
    assert attr("a\tb\nc\rd") == "a&#9;b&#10;c&#13;d"
    value = "a\tb\nc\r\nd"
    assert ET.fromstring(f'<r a="{attr(value)}"/>'.encode()).get("a") == value


@given(values)
def test_attr_round_trips_any_text_in_a_double_quoted_attribute(value: str) -> None:
    parsed = ET.fromstring(f'<r a="{attr(value)}" b="fixed"/>'.encode())
    assert parsed.attrib == {"a": expected_text(value), "b": "fixed"}
