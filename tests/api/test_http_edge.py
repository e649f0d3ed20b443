"""The HTTP edge's limits: a request's head is bounded in bytes, target length and header count (431, 414)
as its bytes arrive, and a connection that sends no request, or its head too slowly, is closed. Raw bytes on
sockets against a live adslot whose head timeout is 1 s."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_protocol import _read_answer
from tests.conftest import LiveServer, start_server

HEAD_TIMEOUT = 1.0


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    server, _ = start_server(
        tmp_path_factory.mktemp("edge"), "sqlite", ADSLOT_HEAD_TIMEOUT_MS=str(int(HEAD_TIMEOUT * 1000))
    )
    yield server
    server.stop()


def _connect(live: LiveServer) -> socket.socket:
    return socket.create_connection(("127.0.0.1", live.settings.port), timeout=10)


def _error(body: bytes) -> dict[str, Any]:
    error: dict[str, Any] = json.loads(body)["error"]
    return error


def _rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def _answered_until_closed(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_a_head_over_the_limit_is_answered_431_and_closed(edge: LiveServer) -> None:
    limit = edge.settings.max_head_bytes
    with _connect(edge) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * limit)
        stream = sock.makefile("rb")
        status, headers, body = _read_answer(stream)
        assert stream.read() == b"", "closed after the answer"
    assert status == 431 and headers["connection"] == "close"
    assert _error(body)["code"] == "headers_too_large"


def test_a_head_just_under_the_limit_is_served(edge: LiveServer) -> None:
    filler = b"a" * (edge.settings.max_head_bytes - 200)
    with _connect(edge) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + filler + b"\r\n\r\n")
        status, _, _ = _read_answer(sock.makefile("rb"))
    assert status == 200


def test_a_target_over_the_limit_is_answered_414(edge: LiveServer) -> None:
    with _connect(edge) as sock:
        sock.sendall(b"GET /healthz?" + b"q" * edge.settings.max_url_bytes + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, body = _read_answer(sock.makefile("rb"))
    assert status == 414 and _error(body)["code"] == "uri_too_long"


def test_a_target_of_megabytes_is_answered_414_from_its_first_packet(edge: LiveServer) -> None:
    with _connect(edge) as sock:
        sock.sendall(b"GET /" + b"q" * 60_000)
        status, _, body = _read_answer(sock.makefile("rb"))
    assert status == 414 and _error(body)["code"] == "uri_too_long"


def test_more_headers_than_the_limit_are_answered_431(edge: LiveServer) -> None:
    def request(count: int) -> int:
        headers = b"".join(b"X-H%d: v\r\n" % i for i in range(count - 1))
        with _connect(edge) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
            status, _, body = _read_answer(sock.makefile("rb"))
        if status == 431:
            assert _error(body)["code"] == "too_many_headers"
        return status

    assert request(edge.settings.max_headers) == 200
    assert request(edge.settings.max_headers + 1) == 431


def test_an_endless_header_is_cut_off_without_growing_memory_or_slowing_other_clients(
    edge: LiveServer,
) -> None:
    """Eight connections stream a header that never ends; the server stops each at the limit. Meanwhile a
    player's requests on another connection are answered as fast as without them."""

    def quiet_times() -> list[float]:
        times = []
        with httpx.Client() as client:
            for _ in range(20):
                started = time.perf_counter()
                assert client.get(f"{edge.url}/healthz").status_code == 200
                times.append(time.perf_counter() - started)
        return sorted(times)

    baseline = quiet_times()
    before = _rss_kib()
    sent: list[int] = []

    def flood() -> None:
        total = 0
        piece = b"a" * 65536
        try:
            with _connect(edge) as sock:
                sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Endless: ")
                while total < 64 * 1024 * 1024:
                    sock.sendall(piece)
                    total += len(piece)
        except OSError:
            pass  # the server closed the connection: what is wanted
        sent.append(total)

    floods = [threading.Thread(target=flood) for _ in range(8)]
    for thread in floods:
        thread.start()
    during = quiet_times()
    for thread in floods:
        thread.join(30)
    grown = _rss_kib() - before
    assert all(total < 8 * 1024 * 1024 for total in sent), f"the server kept reading: {sent}"
    assert grown < 32 * 1024, f"the server grew by {grown} KiB"
    assert during[len(during) // 2] < baseline[len(baseline) // 2] + 0.05, (baseline, during)


def test_a_connection_that_sends_nothing_is_closed_after_the_head_timeout(edge: LiveServer) -> None:
    started = time.monotonic()
    socks = [_connect(edge) for _ in range(50)]
    try:
        for sock in socks:
            assert _answered_until_closed(sock) == b"", "closed without an answer"
    finally:
        for sock in socks:
            sock.close()
    assert time.monotonic() - started < HEAD_TIMEOUT + 2


def test_a_head_sent_too_slowly_is_answered_408_and_closed(edge: LiveServer) -> None:
    started = time.monotonic()
    with _connect(edge) as sock:
        try:
            for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\n":
                sock.sendall(bytes([byte]))
                time.sleep(0.3)
        except OSError:
            pass
        answer = _answered_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert _error(answer.partition(b"\r\n\r\n")[2])["code"] == "request_timeout"
    assert time.monotonic() - started < HEAD_TIMEOUT + 2


def test_a_kept_alive_connection_may_idle_between_requests_longer_than_the_head_timeout(
    edge: LiveServer,
) -> None:
    with _connect(edge) as sock:
        stream = sock.makefile("rb")
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(stream)[0] == 200
        time.sleep(HEAD_TIMEOUT * 2)  # uvicorn's keep-alive timeout (5 s) governs this wait
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answer(stream)[0] == 200


def test_http_1_1_without_host_is_answered_400_and_http_1_0_is_served(edge: LiveServer) -> None:
    with _connect(edge) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        status, _, body = _read_answer(sock.makefile("rb"))
    assert status == 400
    assert _error(body) == {
        "code": "missing_host",
        "message": "an HTTP/1.1 request must carry a Host header",
        "field": "Host",
    }
    with _connect(edge) as sock:
        sock.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        assert _answered_until_closed(sock).startswith(b"HTTP/1.1 200 ")


def test_garbage_is_answered_400_with_the_error_envelope(edge: LiveServer) -> None:
    with _connect(edge) as sock:
        sock.sendall(b"\x16\x03\x01 not http at all\r\n\r\n")
        status, _, body = _read_answer(sock.makefile("rb"))
    assert status == 400 and _error(body)["code"] == "malformed_request"
