"""A request's body must arrive within ADSLOT_BODY_TIMEOUT_MS of its head, on every path (the hot lane's ad
request, the management API, the console): a body sent a byte a second is answered 408 `body_timeout` and
its connection closed; a slow body that finishes in time is served. Against a real `adslot serve` process
whose body timeout is 2 s, with raw sockets and curl."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import play_time
from tests.served import Server, served_setup

pytestmark = pytest.mark.slow("subprocess")  # a real adslot serve, and curl

BODY_TIMEOUT = 2.0
SLOW_PATHS = [
    "/api/v1/ad/request",  # the hot lane
    "/ad/request",
    "/api/v1/ad/request?%66ormat=json",  # a percent-escape: through ASGI to Litestar
    "/sandbox/api/v1/ad/request",
    "/console/sign-in",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    setup = served_setup("sqlite", tmp_path_factory.mktemp("body-timeout"))
    served, key, _ = next(setup)
    served.environ["ADSLOT_BODY_TIMEOUT_MS"] = str(int(BODY_TIMEOUT * 1000))
    served.start()
    yield served, key
    served.terminate()
    next(setup, None)


def _until_closed(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _head(path: str, key: str, length: int) -> bytes:
    kind = "application/x-www-form-urlencoded" if path.startswith("/console/") else "application/json"
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nSsp-Key: {key}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def _drip(port: int, path: str, key: str) -> tuple[bytes, float]:
    """Send a head, then its body a byte a second; the answer and when the server closed, after the head."""
    with socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT + 10) as sock:
        sock.sendall(_head(path, key, 100))
        started = time.monotonic()
        got: list[bytes] = []
        reader = threading.Thread(target=lambda: got.append(_until_closed(sock)))
        reader.start()
        for _ in range(100):
            if not reader.is_alive():
                break
            try:
                sock.sendall(b" ")
            except OSError:
                break
            reader.join(1.0)
        reader.join(BODY_TIMEOUT + 10)
        return got[0] if got else b"", time.monotonic() - started


@pytest.mark.parametrize("path", SLOW_PATHS)
def test_a_body_sent_a_byte_a_second_is_answered_408_and_closed_after_the_body_timeout(
    server: tuple[Server, str], path: str
) -> None:
    served, key = server
    answer, took = _drip(served.port, path, key)
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"connection: close" in head.lower()
    assert json.loads(body)["status"] == 408
    assert json.loads(body)["error"]["code"] == "body_timeout"
    assert BODY_TIMEOUT - 0.2 <= took < BODY_TIMEOUT + 2, took


def test_a_slow_body_that_finishes_within_the_timeout_is_served_and_the_connection_kept(
    server: tuple[Server, str],
) -> None:
    served, key = server
    body = json.dumps({"venue_id": "lobby", "play_time": play_time()}).encode()
    with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
        for _ in range(2):  # the second request's body gets a timeout of its own, not the first one's left
            sock.sendall(_head("/api/v1/ad/request", key, len(body)))
            for start in range(0, len(body), len(body) // 4 + 1):
                time.sleep(BODY_TIMEOUT * 0.15)  # 0.6 of the timeout in all: both requests 1.2 of it
                sock.sendall(body[start : start + len(body) // 4 + 1])
            stream = sock.makefile("rb")
            status = stream.readline()
            assert status.startswith(b"HTTP/1.1 200 "), status
            length = 0
            while (line := stream.readline()) != b"\r\n":
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            assert "vast_tag" in json.loads(stream.read(length))["data"]


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")
def test_curl_uploading_at_a_limited_rate_is_served_within_the_timeout_and_refused_past_it(
    server: tuple[Server, str], tmp_path: Path
) -> None:
    served, key = server
    body = tmp_path / "venue.json"
    body.write_text(json.dumps({"venue_id": "slow-venue", "name": "Slow", "city": "x" * 40}))
    size = body.stat().st_size

    def upload(rate: int, path: str) -> tuple[str, float]:
        started = time.monotonic()
        command = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--limit-rate", str(rate), "-X", "POST"]
        command += ["-H", f"Ssp-Key: {key}", "-H", "Content-Type: application/json"]
        done = subprocess.run(
            [*command, "--data-binary", f"@{body}", f"{served.url}{path}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return done.stdout, time.monotonic() - started

    fast_enough, took = upload(size, "/api/v1/ad/request")  # about a second: under the timeout
    assert took < BODY_TIMEOUT and fast_enough.rsplit("\n", 1)[1] in ("400", "401", "403"), fast_enough
    too_slow, took = upload(size // 8, "/api/v1/ad/request")  # about eight seconds
    assert too_slow.rsplit("\n", 1)[1] == "408" and '"body_timeout"' in too_slow, too_slow
    assert took < BODY_TIMEOUT + 2
