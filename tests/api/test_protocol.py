"""The HTTP protocol's hot lane: pixels and the inline VAST answered below ASGI, with HTTP/1.1 kept whole.

Each test speaks raw HTTP to a live server over a socket, so that what is checked is exactly what a player
gets: pipelined answers in request order, keep-alive and `Connection: close`, bodies and HEAD.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from adslot.api import protocol
from adslot.api.protocol import missing_internals
from adslot.app import ASGIApp, Receive, Scope, Send
from adslot.storage.failures import LedgerUnavailable
from tests.conftest import PROD_VENUE, LiveServer, play_time
from tests.contract.support import AD_REQUEST, issue

Answer = tuple[int, dict[str, str], bytes]


def _read_answer(stream: Any, head: bool = False) -> Answer:
    status_line = stream.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    headers: dict[str, str] = {}
    while (line := stream.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if head else int(headers.get("content-length", "0"))
    return int(status_line.split()[1]), headers, stream.read(length)


@contextmanager
def _connection(live: LiveServer) -> Iterator[tuple[socket.socket, Any]]:
    with socket.create_connection(("127.0.0.1", live.settings.port), timeout=10) as sock:
        yield sock, sock.makefile("rb")


def _get(path: str, *extra: str, method: str = "GET", version: str = "1.1") -> bytes:
    lines = [f"{method} {path} HTTP/{version}", "Host: 127.0.0.1", *extra, "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _post(path: str, body: str, *extra: str) -> bytes:
    encoded = body.encode()
    length = f"Content-Length: {len(encoded)}"
    head = _get(path, "Content-Type: application/json", length, *extra, method="POST")
    return head + encoded


def _exchange(live: LiveServer, *requests: bytes, heads: tuple[bool, ...] = ()) -> list[Answer]:
    """Send all requests in one write (pipelined), then read one answer per request."""
    with _connection(live) as (sock, stream):
        sock.sendall(b"".join(requests))
        return [_read_answer(stream, (heads + (False,) * len(requests))[i]) for i in range(len(requests))]


def _pixel(uuid_text: str, event: str = "impression") -> str:
    if event == "impression":
        return f"/api/v1/ad/callback/?ad_request_uuid={uuid_text}"
    return f"/api/v1/ad/tracking/video/?ad_request_uuid={uuid_text}&event={event}"


@contextmanager
def asgi_answers_418(live: LiveServer) -> Iterator[list[str]]:
    """Every request that reaches the ASGI app is answered 418 and its path recorded: an answer other than
    418 was written by the protocol's lane."""
    assert live.app is not None
    reached: list[str] = []

    async def teapot(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 418, "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    mounts: list[tuple[str, ASGIApp]] = live.app._mounts
    saved = list(mounts)
    mounts[:] = [(mount, teapot) for mount, _ in saved]
    try:
        yield reached
    finally:
        mounts[:] = saved


def test_pixels_and_the_inline_vast_are_answered_by_the_lane_and_everything_else_by_asgi(
    live: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    sandbox = issue(http, live, env="sandbox")["ad_request_uuid"]
    body = json.dumps({"venue_id": PROD_VENUE, "play_time": play_time()})
    post = _post(AD_REQUEST, body, f"Ssp-Key: {live.keys.production}")  # type: ignore[union-attr]
    requests = [
        (post, False),
        (_get(_pixel(ad)), False),
        (_get(_pixel(ad, "start"), method="HEAD"), True),
        (_get(f"/api/v1/ad/vast/{ad}"), False),
        (_get("/sandbox" + _pixel(sandbox, "midpoint")), False),
        (_get("/openapi.json"), False),
        (_get(f"/api/v1/ad/callback/?ad_request_uuid={ad.replace('-', '%2D')}"), False),
    ]
    with asgi_answers_418(live) as reached, _connection(live) as (sock, stream):
        answers = []
        for request, head in requests:  # one after the other on one connection: none is pipelined
            sock.sendall(request)
            answers.append(_read_answer(stream, head))
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 200, 200, 200, 200, 418, 418]
    assert "vast_tag" in json.loads(answers.pop(0)[2])["data"]
    assert json.loads(answers[0][2])["data"]["result"] == "counted"
    assert answers[1][2] == b"" and int(answers[1][1]["content-length"]) > 0
    assert answers[2][2].startswith(b"<?xml") and ad.encode() in answers[2][2]
    assert json.loads(answers[3][2])["data"] == {
        "ad_request_uuid": sandbox,
        "event": "midpoint",
        "result": "counted",
    }
    # Only what the lane is not sure of reached ASGI: an unknown path and a percent-escaped URL.
    assert reached == ["/openapi.json", "/api/v1/ad/callback/"]


def test_the_lane_answers_exactly_as_the_asgi_lane_does(live: LiveServer, http: httpx.Client) -> None:
    """The same request, once plain (the protocol's lane) and once with its dashes percent-escaped (which
    sends it through ASGI): the same status, headers (the request id they both send echoed, the CORS
    headers) and body, but for the date."""
    same_id = "X-Request-Id: compare-lanes"
    ad = issue(http, live)["ad_request_uuid"]
    for plain in (
        "/api/v1/ad/callback/?ad_request_uuid=not-a-uuid",
        "/api/v1/ad/callback/?ad_request_uuid=",
        f"/api/v1/ad/tracking/video/?ad_request_uuid={ad}&event=bogus",
        f"/api/v1/ad/tracking/video/?ad_request_uuid={ad}&event=start&layer=top",
        "/api/v1/ad/tracking/video/?ad_request_uuid=0190c3f0-0000-7000-8000-000000000001&event=start",
        "/api/v1/ad/vast/0190c3f0-0000-7000-8000-000000000001",
        "/api/v1/ad/vast/not-a-uuid",
        f"/api/v1/ad/vast/{ad}",
    ):
        lane, asgi = _exchange(live, _get(plain, same_id), _get(plain.replace("-", "%2D"), same_id))
        assert lane[1].pop("date") and asgi[1].pop("date")
        assert lane == asgi, plain
    # A counted fire and its repeat differ only in the result.
    pixel = _pixel(ad, "complete")
    lane, asgi = _exchange(live, _get(pixel, same_id), _get(pixel.replace("-", "%2D"), same_id))
    assert json.loads(lane[2])["data"]["result"] == "counted"
    assert json.loads(asgi[2])["data"]["result"] == "duplicate"
    for headers in (lane[1], asgi[1]):
        headers.pop("date"), headers.pop("content-length")
    assert (
        lane[1]
        == asgi[1]
        == {
            "server": "uvicorn",
            "content-type": "application/json",
            "cache-control": "no-store",
            "x-request-id": "compare-lanes",
            "vary": "Origin",  # no Origin: a player that is no browser gets no CORS headers (edge/cors.py)
        }
    )


def test_pipelined_requests_mixing_both_lanes_are_answered_in_request_order(
    live: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    events = ("start", "firstQuartile", "midpoint", "thirdQuartile", "complete")
    requests = [_get(_pixel(ad))]
    for event in events:
        requests += [_get(_pixel(ad, event)), _get("/healthz")]
    answers = _exchange(live, *requests)
    assert [status for status, _, _ in answers] == [200] * len(requests)
    pixels = [json.loads(body)["data"] for _, _, body in answers[1::2]]
    assert [p["event"] for p in pixels] == list(events)
    assert all(p["result"] == "counted" for p in pixels)
    assert all(b"worker_pid" in body for _, _, body in answers[2::2])
    record = http.get(f"{live.url}/api/v1/ad/request/{ad}", headers={"Ssp-Key": live.keys.production})  # type: ignore[union-attr]
    assert all(at is not None for at in record.json()["data"]["events"].values())


def test_one_keep_alive_connection_serves_pixel_after_pixel(live: LiveServer, http: httpx.Client) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    with _connection(live) as (sock, stream):
        results = []
        for _ in range(3):
            sock.sendall(_get(_pixel(ad)))
            status, headers, body = _read_answer(stream)
            assert status == 200 and "connection" not in headers
            results.append(json.loads(body)["data"]["result"])
    assert results == ["counted", "duplicate", "duplicate"]


def test_an_idle_connection_closes_a_keep_alive_timeout_after_its_last_hot_answer(
    live: LiveServer, http: httpx.Client
) -> None:
    """One timer per connection keeps the timeout (AdslotHttpProtocol._idle_check): a request before it
    runs out moves it on, and the connection closes once it has been idle for the whole timeout."""
    timeout = 5.0  # uvicorn's default keep-alive timeout, which the live server keeps
    ad = issue(http, live)["ad_request_uuid"]
    with _connection(live) as (sock, stream):
        sock.sendall(_get(_pixel(ad)))
        assert _read_answer(stream)[0] == 200
        time.sleep(timeout * 0.6)
        sock.sendall(_get(_pixel(ad)))
        assert _read_answer(stream)[0] == 200
        time.sleep(timeout * 0.6)  # past the first answer's timeout, within the second's
        sock.sendall(_get(_pixel(ad, "start")))
        assert _read_answer(stream)[0] == 200
        last = time.monotonic()
        sock.settimeout(timeout * 3)
        assert stream.read(1) == b""  # closed by the server, not by this read's timeout
        idle = time.monotonic() - last
    assert timeout - 0.5 <= idle <= timeout + 1.5, idle


@pytest.mark.parametrize(
    ("extra", "version"), [(("Connection: close",), "1.1"), ((), "1.0")], ids=["connection-close", "http-1.0"]
)
def test_a_connection_the_client_closes_gets_its_answer_then_the_close(
    live: LiveServer, http: httpx.Client, extra: tuple[str, ...], version: str
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    with _connection(live) as (sock, stream):
        sock.sendall(_get(_pixel(ad), *extra, version=version))
        status, headers, body = _read_answer(stream)
        assert status == 200 and headers["connection"] == "close"
        assert json.loads(body)["data"]["result"] == "counted"
        assert stream.read() == b""  # the server closed it


def test_a_get_body_is_read_and_dropped_without_leaking_into_the_next_request(
    live: LiveServer, http: httpx.Client
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    with_body = _get(_pixel(ad), "Content-Length: 16") + b"GET /nowhere X\r\n"
    answers = _exchange(live, with_body, _get(_pixel(ad, "start")))
    assert [status for status, _, _ in answers] == [200, 200]
    assert [json.loads(body)["data"]["event"] for _, _, body in answers] == ["impression", "start"]


def test_a_ledger_that_cannot_write_is_answered_503_with_retry_after_in_the_lane(
    live: LiveServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    assert live.app is not None

    def refuse(op: object) -> object:
        raise LedgerUnavailable("the ledger is not running (not yet started, or stopping)")

    monkeypatch.setattr(live.app.environments["production"].writer, "enqueue", refuse)
    [(status, headers, body)] = _exchange(live, _get(_pixel(ad)))
    assert status == 503 and headers["retry-after"] == "1"
    assert json.loads(body)["error"]["code"] == "storage_unavailable"


def test_a_pixel_whose_batch_fails_is_answered_503_from_its_verdict_in_the_lane(
    live: LiveServer, http: httpx.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    ad = issue(http, live)["ad_request_uuid"]
    assert live.app is not None
    writer = live.app.environments["production"].writer

    def failed(op: object) -> asyncio.Future[object]:
        # As the group committer fails a batch the database refused: the verdict's future, not the call.
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        future.get_loop().call_later(0.01, future.set_exception, LedgerUnavailable("the database is locked"))
        return future

    monkeypatch.setattr(writer, "enqueue", failed)
    [(status, headers, body), (second, _, _)] = _exchange(live, _get(_pixel(ad)), _get(_pixel(ad)))
    assert status == 503 and headers["retry-after"] == "1"
    assert json.loads(body)["error"]["code"] == "storage_unavailable"
    assert second == 503, "the connection stays in step: the pipelined pixel is answered after the first"


def test_ad_requests_in_the_lane_answer_413_past_the_body_limit_and_keep_the_connection_in_step(
    live: LiveServer,
) -> None:
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    limit = live.settings.max_body_bytes
    fits = json.dumps({"venue_id": PROD_VENUE, "play_time": play_time()})
    too_large = json.dumps({"venue_id": PROD_VENUE, "play_time": play_time(), "pad": "x" * limit})
    xml = _post(AD_REQUEST + "?format=xml", fits, key)
    answers = _exchange(live, _post(AD_REQUEST, too_large, key), xml, _post("/ad/request", fits, key))
    assert [status for status, _, _ in answers] == [413, 200, 200]
    assert json.loads(answers[0][2])["error"] == {
        "code": "payload_too_large",
        "message": f"the body may be at most {limit} bytes",
        "field": "body",
    }
    assert answers[1][1]["content-type"].startswith("application/xml")
    assert "x-ad-request-uuid" in answers[1][1]
    assert "vast_tag" in json.loads(answers[2][2])["data"]


def test_this_uvicorn_has_every_internal_the_hot_lane_uses() -> None:
    """Fails on a uvicorn release that dropped or renamed something the lane extends or reads: widen the
    pin in pyproject.toml only once the lane is checked against it."""
    assert missing_internals() == []


def test_an_internal_a_uvicorn_release_lacks_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    changed = {**protocol.INTERNALS, "HttpToolsProtocol": (*protocol.INTERNALS["HttpToolsProtocol"], "lane")}
    monkeypatch.setattr(protocol, "INTERNALS", changed)
    assert missing_internals() == ["HttpToolsProtocol.lane"]


def test_serve_falls_back_to_uvicorn_s_own_protocol_where_the_lane_s_internals_are_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from adslot.cli import _http_protocol

    assert _http_protocol("0.54.0") is protocol.AdslotHttpProtocol
    monkeypatch.setattr(protocol, "missing_internals", lambda: ["HttpToolsProtocol.cycle"])
    assert _http_protocol("9.9.9") == "httptools"
    assert (
        "uvicorn 9.9.9 lacks what adslot's hot lane uses (HttpToolsProtocol.cycle)" in capsys.readouterr().err
    )
