"""Requests as everyday HTTP clients send them, in raw bytes on a socket: an ignored upgrade offer (Java's
HttpClient, `curl --http2` on cleartext), split across packets, chunked, pipelined; a client that
half-closes after its request. Each is checked against its answer and what the ledger holds after."""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_protocol import _read_answer
from tests.conftest import PROD_VENUE, LiveServer, play_time
from tests.contract.support import AD_REQUEST, issue

JAVA_UPGRADE = (
    "Connection: Upgrade, HTTP2-Settings",
    "Upgrade: h2c",
    "HTTP2-Settings: AAEAAEAAAAIAAAABAAMAAABkAAQBAAAAAAUAAEAA",
)
"""What java.net.http.HttpClient (Java 11+, its defaults) sends with every cleartext request."""


def _head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", *headers, "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _ad_request_body() -> bytes:
    return json.dumps({"venue_id": PROD_VENUE, "play_time": play_time()}).encode()


def _chunked(body: bytes, size: int = 7) -> bytes:
    parts = [
        b"%x\r\n%s\r\n" % (len(body[i : i + size]), body[i : i + size]) for i in range(0, len(body), size)
    ]
    return b"".join(parts) + b"0\r\n\r\n"


def _post_json(path: str, key: str, body: bytes, *headers: str, chunked: bool = False) -> bytes:
    """A JSON POST as raw bytes, with `headers` (an upgrade offer, say), by Content-Length or chunked."""
    if chunked:
        return _head(
            "POST", path, key, "Content-Type: application/json", *headers, "Transfer-Encoding: chunked"
        ) + _chunked(body)
    return (
        _head("POST", path, key, "Content-Type: application/json", *headers, f"Content-Length: {len(body)}")
        + body
    )


@contextmanager
def _connection(live: LiveServer) -> Iterator[tuple[socket.socket, Any]]:
    with socket.create_connection(("127.0.0.1", live.settings.port), timeout=10) as sock:
        yield sock, sock.makefile("rb")


def _send_in_pieces(sock: socket.socket, data: bytes, pieces: int) -> None:
    """`data` in `pieces` writes with a pause between, so that the server reads them as separate packets."""
    step = max(1, len(data) // pieces)
    for i in range(0, len(data), step):
        sock.sendall(data[i : i + step])
        time.sleep(0.02)


def _record(http: httpx.Client, live: LiveServer, uuid: str) -> dict[str, Any]:
    response = http.get(
        f"{live.url}/api/v1/ad/request/{uuid}",
        headers={"Ssp-Key": live.keys.production},  # type: ignore[union-attr]
    )
    assert response.status_code == 200, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


@pytest.mark.parametrize("pieces", [1, 3, 40])
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_an_ad_request_with_java_s_h2c_offer_is_served_as_http_1_1_body_and_all(
    live: LiveServer, http: httpx.Client, framing: str, pieces: int
) -> None:
    body = _ad_request_body()
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    request = _post_json(AD_REQUEST, key, body, *JAVA_UPGRADE, chunked=framing == "chunked")
    with _connection(live) as (sock, stream):
        _send_in_pieces(sock, request, pieces)
        status, headers, answer = _read_answer(stream)
        assert status == 200, answer
        assert "upgrade" not in headers.get("connection", "").lower()
        uuid = json.loads(answer)["data"]["ad_request_uuid"]
        # The connection carries on as HTTP/1.1: the player's impression on it is counted.
        sock.sendall(_head("GET", f"/api/v1/ad/callback/?ad_request_uuid={uuid}", *JAVA_UPGRADE))
        status, _, fired = _read_answer(stream)
    assert status == 200 and json.loads(fired)["data"]["result"] == "counted"
    record = _record(http, live, uuid)
    assert record["events"]["impression"] is not None and record["duplicate_count"] == 0


def test_requests_pipelined_after_an_ignored_offer_are_answered_in_order(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid = issue(http, live)["ad_request_uuid"]
    body = _ad_request_body()
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    offer = _post_json(AD_REQUEST, key, body, *JAVA_UPGRADE)
    pixel = _head("GET", f"/api/v1/ad/tracking/video/?ad_request_uuid={uuid}&event=start")
    with _connection(live) as (sock, stream):
        sock.sendall(offer + pixel + offer)
        answers = [_read_answer(stream) for _ in range(3)]
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert "vast_tag" in json.loads(answers[0][2])["data"]
    assert json.loads(answers[1][2])["data"] == {
        "ad_request_uuid": uuid,
        "event": "start",
        "result": "counted",
    }
    assert "vast_tag" in json.loads(answers[2][2])["data"]


def test_a_management_post_with_an_h2c_offer_gets_its_body(live: LiveServer) -> None:
    """The framework's lane (everything but the hot paths) reads the body whole too."""
    body = json.dumps({"name": "Upgraded Advertiser"}).encode()
    key = f"Ssp-Key: {live.keys.production_admin}"  # type: ignore[union-attr]
    request = _post_json("/api/v1/advertisers", key, body, *JAVA_UPGRADE)
    with _connection(live) as (sock, stream):
        _send_in_pieces(sock, request, 3)
        status, _, answer = _read_answer(stream)
    assert status == 201, answer
    assert json.loads(answer)["name"] == "Upgraded Advertiser"


def test_a_malformed_body_after_an_ignored_offer_is_a_400_that_closes_the_connection(
    live: LiveServer,
) -> None:
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    request = _post_json(AD_REQUEST, key, b"", *JAVA_UPGRADE, chunked=True)
    request = request.removesuffix(_chunked(b"")) + b"zz\r\nnot a chunk\r\n"
    with _connection(live) as (sock, stream):
        sock.sendall(request)
        status, headers, _ = _read_answer(stream)
        assert status == 400
        assert headers.get("connection") == "close"
        assert stream.read() == b"", "closed after the 400"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_with_http2_on_cleartext_gets_its_ad_and_fires_its_pixel(
    live: LiveServer, http: httpx.Client
) -> None:
    """curl --http2 offers h2c with every cleartext request (Upgrade: h2c, HTTP2-Settings)."""
    body = _ad_request_body().decode()
    run = subprocess.run(
        [
            "curl",
            "-sS",
            "--http2",
            "-X",
            "POST",
            f"{live.url}{AD_REQUEST}",
            "-H",
            f"Ssp-Key: {live.keys.production}",  # type: ignore[union-attr]
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            "-w",
            "\n%{http_code} %{http_version}",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    answer, _, status = run.stdout.rpartition("\n")
    assert status == "200 1.1", run.stdout
    uuid = json.loads(answer)["data"]["ad_request_uuid"]
    fired = subprocess.run(
        ["curl", "-sS", "--http2", f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert json.loads(fired.stdout)["data"]["result"] == "counted"
    assert _record(http, live, uuid)["events"]["impression"] is not None


def _half_closed(live: LiveServer, request: bytes) -> tuple[int, dict[str, str], bytes, bytes]:
    """Send `request`, shut the socket's sending side down, read the answer and what follows it."""
    with _connection(live) as (sock, stream):
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        status, headers, body = _read_answer(stream)
        return status, headers, body, stream.read()


def test_an_ad_request_from_a_client_that_half_closes_is_answered_then_the_connection_closes(
    live: LiveServer, http: httpx.Client
) -> None:
    body = _ad_request_body()
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    status, _, answer, after = _half_closed(live, _post_json(AD_REQUEST, key, body))
    assert status == 200 and after == b""
    uuid = json.loads(answer)["data"]["ad_request_uuid"]
    assert _record(http, live, uuid)["state"] == "issued"


@pytest.mark.parametrize(
    "event", ["impression", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]
)
def test_a_pixel_from_a_client_that_half_closes_is_answered_and_counted_once(
    live: LiveServer, http: httpx.Client, event: str
) -> None:
    uuid = issue(http, live)["ad_request_uuid"]
    if event == "impression":
        path = f"/api/v1/ad/callback/?ad_request_uuid={uuid}"
    else:
        path = f"/api/v1/ad/tracking/video/?ad_request_uuid={uuid}&event={event}"
    status, _, answer, after = _half_closed(live, _head("GET", path))
    assert status == 200 and after == b""
    assert json.loads(answer)["data"]["result"] == "counted"
    again = http.get(f"{live.url}{path}").json()["data"]["result"]
    assert again == "duplicate", "counted once, on the half-closed connection"
    record = _record(http, live, uuid)
    assert record["duplicate_count"] == 1


def test_pipelined_requests_before_a_half_close_are_all_answered_in_order(
    live: LiveServer, http: httpx.Client
) -> None:
    uuid = issue(http, live)["ad_request_uuid"]
    requests = [
        _head("GET", f"/api/v1/ad/callback/?ad_request_uuid={uuid}"),
        _head("GET", "/healthz"),
        _head("GET", f"/api/v1/ad/vast/{uuid}"),
    ]
    with _connection(live) as (sock, stream):
        sock.sendall(b"".join(requests))
        sock.shutdown(socket.SHUT_WR)
        answers = [_read_answer(stream) for _ in requests]
        assert stream.read() == b""
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert answers[2][2].startswith(b"<?xml")


@pytest.mark.skipif(
    shutil.which("java") is None, reason="Java is not installed (Debian: openjdk-17-jdk-headless)"
)
def test_a_player_on_java_s_own_http_client_gets_its_ad_and_its_impression_is_counted(
    live: LiveServer, http: httpx.Client
) -> None:
    """java.net.http.HttpClient with its defaults offers h2c on every cleartext request (Java 11+)."""
    player = Path(__file__).parent / "clients" / "JavaPlayer.java"
    run = subprocess.run(
        ["java", str(player), live.url, live.keys.production, _ad_request_body().decode()],  # type: ignore[union-attr]
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    ad_status, ad_body, pixel_status, pixel_body = run.stdout.splitlines()
    assert ad_status == "200 HTTP_1_1", run.stdout
    uuid = json.loads(ad_body)["data"]["ad_request_uuid"]
    assert pixel_status == "200 HTTP_1_1"
    assert json.loads(pixel_body)["data"] == {
        "ad_request_uuid": uuid,
        "event": "impression",
        "result": "counted",
    }
    assert _record(http, live, uuid)["events"]["impression"] is not None


@pytest.mark.parametrize("path", [AD_REQUEST, "/api/v1/advertisers"])
def test_a_gzip_encoded_body_is_refused_415_by_name_not_read_as_garbage(live: LiveServer, path: str) -> None:
    body = gzip.compress(json.dumps({"venue_id": PROD_VENUE, "play_time": play_time(), "name": "A"}).encode())
    key = live.keys.production if path == AD_REQUEST else live.keys.production_admin  # type: ignore[union-attr]
    headers = {"Ssp-Key": key, "Content-Type": "application/json", "Content-Encoding": "gzip"}
    response = httpx.post(f"{live.url}{path}", content=body, headers=headers)
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_content_encoding"
    assert response.json()["error"]["field"] == "Content-Encoding"


def test_an_identity_content_encoding_is_read_as_none(live: LiveServer) -> None:
    body = _ad_request_body()
    headers = {
        "Ssp-Key": live.keys.production,  # type: ignore[union-attr]
        "Content-Type": "application/json",
        "Content-Encoding": "identity",
    }
    assert httpx.post(f"{live.url}{AD_REQUEST}", content=body, headers=headers).status_code == 200


def test_a_client_that_half_closes_inside_a_request_is_closed_without_an_answer(live: LiveServer) -> None:
    key = f"Ssp-Key: {live.keys.production}"  # type: ignore[union-attr]
    body = _ad_request_body()
    for cut_short in (_post_json(AD_REQUEST, key, body)[:-5], _head("GET", "/healthz")[:-4]):
        with _connection(live) as (sock, stream):
            sock.sendall(cut_short)
            sock.shutdown(socket.SHUT_WR)
            assert stream.read() == b"", "nothing to answer: the request never ended"
