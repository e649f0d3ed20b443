"""A partner's markup is checked at a cost it cannot inflate: a DTD or an entity declaration is refused before
anything is expanded, nesting and an answer's bytes and elements are capped, verdicts are remembered by
digest, and the IAB samples are still VAST."""

from __future__ import annotations

import contextlib
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from adslot.vast.markup import (
    ANSWER_BYTES,
    ANSWER_ELEMENTS,
    MAX_DEPTH,
    Budget,
    MarkupChecks,
    NotVast,
    OverBudget,
    UnsafeMarkup,
    check_vast,
)
from tests.vast.schema import VAST_DIR

SAMPLES = sorted((VAST_DIR / "samples").glob("*.xml"))
AD = (
    '<VAST version="2.0"><Ad id="a"><InLine><AdSystem>dsp</AdSystem><AdTitle>t</AdTitle>{}</InLine></Ad>'
    "</VAST>"
)


def laughs(levels: int = 10, fan: int = 10) -> str:
    """A "billion laughs": `levels` entities each `fan` references to the one before, in 1 KiB or less."""
    entities = ['<!ENTITY a0 "lol">'] + [
        f'<!ENTITY a{level} "{f"&a{level - 1};" * fan}">' for level in range(1, levels)
    ]
    return (
        f'<?xml version="1.0"?><!DOCTYPE VAST [{"".join(entities)}]>'
        f'<VAST version="2.0"><Ad><InLine><AdSystem>&a{levels - 1};</AdSystem></InLine></Ad></VAST>'
    )


def nested(depth: int) -> str:
    """A VAST ad whose InLine holds elements nested so that the deepest is `depth` levels down."""
    inner = depth - 3
    return AD.format("<x>" * inner + "</x>" * inner)


def seconds(run: object, times: int) -> float:
    assert callable(run)
    started = time.perf_counter()
    for _ in range(times):
        with contextlib.suppress(NotVast, ET.ParseError):
            run()
    return (time.perf_counter() - started) / times


def test_the_iab_samples_are_there() -> None:
    assert len(SAMPLES) >= 5, VAST_DIR


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_each_iab_sample_is_vast(sample: Path) -> None:
    check_vast(sample.read_text(encoding="utf-8"), Budget())
    check_vast(sample.read_bytes())


def test_a_billion_laughs_is_refused_at_its_dtd_long_before_expat_would_stop_expanding_it() -> None:
    bomb = laughs()
    assert len(bomb.encode()) <= 1024
    with pytest.raises(UnsafeMarkup, match="document type declaration"):
        check_vast(bomb)
    # The stdlib parser expat refuses this bomb too, but only once its amplification guard trips.
    expat_s = seconds(lambda: ET.fromstring(bomb), 3)
    refused_s = seconds(lambda: check_vast(bomb), 30)
    assert refused_s * 50 < expat_s, (refused_s, expat_s)


@pytest.mark.parametrize(
    "markup",
    [
        '<!DOCTYPE VAST><VAST version="2.0"><Ad><InLine/></Ad></VAST>',
        '<!DOCTYPE VAST SYSTEM "http://dtd.example/vast.dtd"><VAST><Ad><InLine/></Ad></VAST>',
        '<!DOCTYPE VAST [<!ENTITY e "x">]><VAST><Ad><InLine>&e;</InLine></Ad></VAST>',
        '<!DOCTYPE VAST [<!ENTITY e SYSTEM "file:///etc/passwd">]><VAST><Ad><InLine>&e;</InLine></Ad></VAST>',
        '<!DOCTYPE VAST [<!ENTITY % p "x">]><VAST><Ad><InLine/></Ad></VAST>',
    ],
    ids=["bare", "external dtd", "internal entity", "external entity", "parameter entity"],
)
def test_any_document_type_declaration_is_refused_as_unsafe(markup: str) -> None:
    with pytest.raises(UnsafeMarkup):
        check_vast(markup)


def test_an_html_doctype_inside_cdata_is_text_not_a_declaration() -> None:
    companion = "<HTMLResource><![CDATA[<!DOCTYPE html><html><body>ad</body></html>]]></HTMLResource>"
    check_vast(AD.format(companion))


def test_an_entity_without_a_declaration_is_not_well_formed() -> None:
    with pytest.raises(NotVast, match="well-formed") as refused:
        check_vast(AD.format("<Impression>&undeclared;</Impression>"))
    assert not isinstance(refused.value, UnsafeMarkup)


def test_nesting_up_to_max_depth_is_vast_and_one_deeper_is_unsafe() -> None:
    check_vast(nested(MAX_DEPTH))
    with pytest.raises(UnsafeMarkup, match=f"deeper than {MAX_DEPTH}"):
        check_vast(nested(MAX_DEPTH + 1))


def test_deep_markup_is_refused_where_it_goes_too_deep_not_after_parsing_it_all() -> None:
    deep = AD.format("<x>" * 30_000 + "</x>" * 30_000)
    wide = AD.format("<x/>" * 30_000)
    with pytest.raises(UnsafeMarkup):
        check_vast(deep)
    assert seconds(lambda: check_vast(deep), 10) * 10 < seconds(lambda: check_vast(wide), 10)


def test_an_answer_budget_caps_the_bytes_parsed_and_is_spent_by_each_check() -> None:
    markup = AD.format("")
    budget = Budget()
    check_vast(markup, budget)
    assert budget.bytes == ANSWER_BYTES - len(markup.encode())
    assert budget.elements == ANSWER_ELEMENTS - 5  # VAST, Ad, InLine, AdSystem, AdTitle
    with pytest.raises(OverBudget, match="bytes"):
        check_vast(markup, Budget(bytes=len(markup.encode()) - 1))


def test_an_answer_budget_caps_the_elements_met_and_stops_the_parse_there() -> None:
    many = AD.format("<Impression/>" * ANSWER_ELEMENTS)
    assert len(many.encode()) < ANSWER_BYTES
    budget = Budget()
    with pytest.raises(OverBudget, match="elements"):
        check_vast(many, budget)
    assert budget.elements == 0
    check_vast(many)  # without a budget, it is VAST


def test_a_namespaced_root_is_not_vast() -> None:
    with pytest.raises(NotVast, match="not <VAST>"):
        check_vast('<VAST xmlns="urn:other"><Ad><InLine/></Ad></VAST>')


def test_a_leading_byte_order_mark_and_blank_lines_are_tolerated() -> None:
    check_vast("\ufeff\n  " + AD.format(""))
    check_vast(b"\r\n\xef\xbb\xbf" + AD.format("").encode())


def test_a_verdict_is_remembered_by_digest_so_a_repeated_markup_costs_no_parse_or_budget() -> None:
    checks = MarkupChecks()
    good, bomb = AD.format("").encode(), laughs().encode()
    budget = Budget()
    checks.check(good, budget)
    spent = budget.bytes
    checks.check(good, budget)
    assert budget.bytes == spent
    with pytest.raises(UnsafeMarkup, match="document type declaration"):
        checks.check(bomb, budget)
    spent = budget.bytes
    with pytest.raises(UnsafeMarkup, match="document type declaration"):
        checks.check(bomb, budget)
    assert budget.bytes == spent


def test_an_over_budget_markup_gets_no_verdict_and_is_checked_again_with_a_fresh_budget() -> None:
    checks = MarkupChecks()
    good = AD.format("").encode()
    with pytest.raises(OverBudget):
        checks.check(good, Budget(bytes=1))
    checks.check(good, Budget())


def test_only_the_most_recent_verdicts_are_remembered() -> None:
    checks = MarkupChecks(size=2)
    markups = [AD.format(f"<Impression>{n}</Impression>").encode() for n in range(3)]
    for markup in markups:
        checks.check(markup)
    budget = Budget()
    checks.check(markups[0], budget)  # forgotten: parsed again
    assert budget.bytes == ANSWER_BYTES - len(markups[0])
