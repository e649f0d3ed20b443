"""Everything acknowledged before a crash is found after a restart: the write path commits before answering.

The server runs as a real `adslot serve` process, set up through the CLI, and is killed with SIGKILL while
a client is sending ad requests and impressions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.conftest import BACKENDS, drop_schemas, free_port, make_settings


def cli(environ: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "adslot.cli", *args], env=environ, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


class Server:
    def __init__(self, environ: dict[str, str], port: int) -> None:
        self.environ = environ
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "adslot.cli", "serve", "--port", str(self.port)],
            env=self.environ,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError("server did not come up")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)


@pytest.fixture(params=BACKENDS)
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Server, str]]:
    port = free_port()
    settings, schemas = make_settings(tmp_path, str(request.param), port)
    environ = dict(os.environ)
    environ |= {"ADSLOT_DATA_DIR": str(tmp_path), "ADSLOT_PORT": str(port)}
    if schemas:
        production = settings.environment("production")
        environ |= {
            "ADSLOT_DATABASE_URL": production.database_url,
            "ADSLOT_DATABASE_SCHEMA": schemas[0],
            "ADSLOT_SANDBOX_DATABASE_SCHEMA": schemas[1],
        }
    now = int(time.time())
    cli(environ, "venues", "add", "--venue-id", "lobby", "--name", "Lobby", "--timezone", "Europe/Paris")
    advertiser = json.loads(cli(environ, "campaigns", "add-advertiser", "--name", "Durable Inc"))
    campaign = json.loads(
        cli(
            environ,
            "campaigns",
            "add",
            "--advertiser-id",
            str(advertiser["id"]),
            "--name",
            "c",
            "--start-at",
            str(now - 60),
            "--end-at",
            str(now + 86400),
            "--venue",
            "lobby",
        )
    )
    cli(
        environ,
        "campaigns",
        "add-creative",
        "--campaign-id",
        str(campaign["id"]),
        "--name",
        "v",
        "--media-url",
        "https://media.example.test/v.mp4",
        "--width",
        "1920",
        "--height",
        "1080",
        "--duration-seconds",
        "10",
    )
    key = cli(environ, "keys", "create", "--account", "player").strip()
    server = Server(environ, port)
    yield server, key
    if server.process and server.process.poll() is None:
        server.kill()
    if schemas:
        drop_schemas(schemas)


def test_acknowledged_requests_and_impressions_survive_sigkill_and_restart(setup: tuple[Server, str]) -> None:
    server, key = setup
    server.start()
    acked_requests: list[str] = []
    acked_impressions: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def player() -> None:
        with httpx.Client(timeout=5) as client:
            for _ in range(2000):  # bounded
                if stop.is_set():
                    return
                try:
                    r = client.post(
                        f"{server.url}/api/v1/ad/request",
                        headers={"Ssp-Key": key},
                        json={"venue_id": "lobby", "play_time": int(time.time()) + 30},
                    )
                    if r.status_code != 200:
                        continue
                    uuid = r.json()["data"]["ad_request_uuid"]
                    with lock:
                        acked_requests.append(uuid)
                    p = client.get(f"{server.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                    if p.status_code == 200:
                        with lock:
                            acked_impressions.append(uuid)
                except httpx.TransportError:
                    return

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(player) for _ in range(8)]
        time.sleep(1.5)
        server.kill()
        stop.set()
        for f in futures:
            f.result()
    assert len(acked_requests) > 20, "the load did not get going before the kill"

    server.start()
    with httpx.Client(timeout=10) as client:
        for uuid in acked_requests:
            r = client.get(f"{server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": key})
            assert r.status_code == 200, f"acknowledged ad request {uuid} lost"
            data = r.json()["data"]
            if uuid in acked_impressions:
                assert data["state"] == "played" and data["events"]["impression"] is not None
            assert data["duplicate_count"] == 0
    server.kill()
