"""A notice goes only to its partner's endpoint host and declared notice hosts, over http(s), without user
info, at most 8 KiB long: hosts compare in lower case without a trailing dot, IPv6 literals canonically,
ports exactly (a declared host without a port admits the scheme's default port only)."""

from __future__ import annotations

import pytest

from adslot.demand.notice_rules import (
    MAX_NOTICE_BYTES,
    NOTHING,
    _template_fault,
    notice_fault,
    notice_rule,
    parse_notice_host,
    shown_notice_host,
    template_fault,
)

RULE = notice_rule(
    "https://bid.dsp.example/openrtb",
    ("win.dsp.example", "Track.DSP.example.:8080", "10.0.0.7", "[2001:db8::1]:9000"),
)
LOCAL = notice_rule("http://127.0.0.1:8123/openrtb")


@pytest.mark.parametrize(
    ("url", "fault"),
    [
        ("https://bid.dsp.example/win?p=1", None),  # the endpoint's host
        ("http://bid.dsp.example/win", None),  # the endpoint names no port: either default port
        ("https://bid.dsp.example:8443/win", "notice_host"),  # but no other port
        ("https://win.dsp.example/w", None),
        ("http://win.dsp.example:80/w", None),  # the default port, spelled out
        ("https://win.dsp.example:443/w", None),
        ("https://win.dsp.example:80/w", "notice_host"),  # http's default port over https is another port
        ("https://win.dsp.example:6379/w", "notice_host"),
        ("https://WIN.DSP.Example/w", None),  # upper case
        ("https://win.dsp.example./w", None),  # trailing dot
        ("https://track.dsp.example:8080/t", None),  # declared with its port, in upper case with a dot
        ("https://track.dsp.example/t", "notice_host"),  # only that port
        ("http://10.0.0.7/n", None),
        ("http://10.0.0.7:6379/n", "notice_host"),
        ("http://[2001:db8::1]:9000/n", None),
        ("http://[2001:DB8:0:0:0:0:0:1]:9000/n", None),  # the same address, spelled out
        ("http://[2001:db8::1]/n", "notice_host"),
        ("http://[::1]:9000/n", "notice_host"),
        ("https://sub.win.dsp.example/w", "notice_host"),  # subdomains are other hosts
        ("https://dsp.example/w", "notice_host"),
        ("https://win.dsp.example.evil.example/w", "notice_host"),
        ("http://127.0.0.1:6379/", "notice_host"),
        ("http://169.254.169.254/latest/meta-data/", "notice_host"),
        ("ftp://win.dsp.example/w", "notice_scheme"),
        ("javascript:alert(1)", "notice_scheme"),
        ("//win.dsp.example/w", "notice_scheme"),
        ("https://user:pass@win.dsp.example/w", "notice_userinfo"),
        ("https://win.dsp.example@127.0.0.1/w", "notice_userinfo"),
        ("https://win.dsp.example\\@127.0.0.1/w", "notice_malformed"),
        ("https://win.dsp.example:99999/w", "notice_malformed"),
        ("https:///w", "notice_malformed"),
        ("https://win.dsp.example/" + "x" * MAX_NOTICE_BYTES, "notice_too_long"),
    ],
)
def test_a_notice_url_is_sent_only_to_a_declared_host_and_port_over_http_or_https(
    url: str, fault: str | None
) -> None:
    assert notice_fault(url, RULE) == fault


def test_a_template_gets_the_same_verdict_as_a_url_remembered_and_one_too_long_is_not_remembered() -> None:
    _template_fault.cache_clear()
    for url, fault in [
        ("https://win.dsp.example/w?a=${AUCTION_ID}", None),
        ("https://evil.example/w?a=${AUCTION_ID}", "notice_host"),
        ("ftp://win.dsp.example/w", "notice_scheme"),
    ]:
        assert template_fault(url, RULE) == fault == notice_fault(url, RULE)
        assert template_fault(url, RULE) == fault
    assert _template_fault.cache_info().hits == 3
    long = "https://win.dsp.example/?" + "x" * MAX_NOTICE_BYTES
    assert template_fault(long, RULE) == "notice_too_long"
    assert _template_fault.cache_info().currsize == 3


def test_the_length_limit_counts_utf8_bytes_and_admits_exactly_8_kib() -> None:
    head = "https://win.dsp.example/?"
    assert notice_fault(head + "x" * (MAX_NOTICE_BYTES - len(head)), RULE) is None
    assert notice_fault(head + "x" * (MAX_NOTICE_BYTES - len(head) + 1), RULE) == "notice_too_long"
    assert notice_fault(head + "é" * ((MAX_NOTICE_BYTES - len(head)) // 2 + 1), RULE) == "notice_too_long"


def test_an_endpoint_with_a_port_admits_that_port_of_its_host_only() -> None:
    assert notice_fault("http://127.0.0.1:8123/win", LOCAL) is None
    assert notice_fault("http://127.0.0.1:6379/", LOCAL) == "notice_host"
    assert notice_fault("http://127.0.0.1/", LOCAL) == "notice_host"
    assert notice_fault("http://127.0.0.2:8123/win", LOCAL) == "notice_host"
    assert notice_fault("http://localhost:8123/win", LOCAL) == "notice_host"


def test_the_empty_rule_admits_nothing() -> None:
    assert notice_fault("https://anything.example/", NOTHING) == "notice_host"


@pytest.mark.parametrize(
    ("entry", "shown"),
    [
        ("Win.Example.", "win.example"),
        ("win.example:8080", "win.example:8080"),
        ("10.0.0.7", "10.0.0.7"),
        ("[2001:DB8:0::1]", "[2001:db8::1]"),
        ("[::1]:9000", "[::1]:9000"),
    ],
)
def test_a_declared_notice_host_is_stored_normalised(entry: str, shown: str) -> None:
    assert shown_notice_host(entry) == shown


@pytest.mark.parametrize(
    "entry",
    [
        "",
        "https://win.example/",
        "win.example/path",
        "user@win.example",
        "win.example:0",
        "win.example:99999",
        "win.example:port",
        "win example",
        "-bad.example",
        "bad-.example",
        "[not-ipv6]",
        "2001:db8::1",  # an IPv6 literal needs its brackets, as in a URL
        "bücher.example",
        "win.example?x",
    ],
)
def test_a_declared_notice_host_that_is_not_a_host_is_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        parse_notice_host(entry)
