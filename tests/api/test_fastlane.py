"""The fast lane parses raw query strings itself: any bytes get a defined answer, never a 500."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote

import httpx
from hypothesis import given
from hypothesis import strategies as st

from adslot.api.fastlane import _query
from tests.conftest import LiveServer


def test_non_latin1_percent_escapes_in_a_pixel_query_get_a_400_not_a_500(
    live: LiveServer, http: httpx.Client
) -> None:
    response = http.get(
        f"{live.url}/api/v1/ad/tracking/video/?ad_request_uuid=01a20133-5465-78a2-9c1c-4875341844f0&event=%E2%9C%93"
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "unknown_event"
    bad = http.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid=%FF%FE%E2%9C")
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "malformed_ad_request_uuid"


@given(st.lists(st.tuples(st.text(max_size=6), st.text(max_size=6), st.booleans()), max_size=6))
def test_the_fast_query_reader_reads_what_parse_qsl_reads(pairs: list[tuple[str, str, bool]]) -> None:
    """The fast lane splits unescaped queries itself; it must agree with parse_qsl on every query."""
    raw = "&".join(f"{quote(k)}={quote(v)}" if eq else quote(k) for k, v, eq in pairs).encode("ascii")
    for query in (raw, raw.replace(b"%20", b"+"), b"&" + raw + b"&&"):
        expected: dict[str, str] = {}
        for name, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True, encoding="latin-1"):
            expected.setdefault(name, value.encode("latin-1").decode("utf-8", "replace"))
        assert _query({"query_string": query}) == expected
