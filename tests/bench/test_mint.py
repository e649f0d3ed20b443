"""The mint's ad requests name a slot still ahead when its last one is sent, however long it runs.

wrk sends one prebuilt request for a whole run, so its play_time is fixed when wrk starts; adslot refuses a
play_time more than its skew (60 s) in the past, and a pixel list takes minutes to mint. A real wrk runs
mint.lua against a small loopback server that records the bodies it receives.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from bench.servers import PLAY_LEAD_SECONDS, mint_ad_requests
from bench.wrk import wrk_binary

from tests.bench.test_bench_smoke import require_wrk


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as wrk expects
    play_times: list[int] = []  # noqa: RUF012 - shared by the handler instances of one server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.play_times.append(body["play_time"])
        answer = b'{"data":{"ad_request_uuid":"0123abcd-0000-7000-8000-000000000000"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[tuple[str, list[int]]]:
    play_times: list[int] = []
    handler = type("Recorder", (_Recorder,), {"play_times": play_times})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", play_times
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(60)
def test_a_mint_asks_for_a_play_time_a_lead_after_its_own_end(
    recorder: tuple[str, list[int]], tmp_path: Path
) -> None:
    require_wrk()
    url, play_times = recorder
    seconds = 2
    started = time.time()
    uuids = mint_ad_requests(
        wrk_binary(), url, "key", seconds, tmp_path / "uuids.txt", connections=2, threads=1
    )
    assert uuids and play_times, "wrk made no request"
    assert len(set(play_times)) == 1, "one prebuilt request for the whole run"
    assert play_times[0] >= int(started) + seconds + PLAY_LEAD_SECONDS
    assert play_times[0] <= time.time() + seconds + PLAY_LEAD_SECONDS + 1
