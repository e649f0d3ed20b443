"""A real `adslot serve` process, set up through the CLI, for tests that kill, signal or scale it."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from adslot.app import STOPPED_CLEANLY
from adslot.settings import Settings
from tests.conftest import drop_schemas, free_port, make_settings

T = TypeVar("T")


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
        self.log = Path(environ["ADSLOT_DATA_DIR"]) / "serve.log"

    def start(self, workers: int = 1) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "adslot.cli",
                "serve",
                "--port",
                str(self.port),
                "--workers",
                str(workers),
            ],
            env=self.environ,
            stdout=subprocess.DEVNULL,
            stderr=self.log.open("ab"),
        )
        self.wait_serving(workers)

    def wait_serving(self, workers: int, gone: Collection[int] = ()) -> None:
        """Return once `workers` worker processes, none of them in `gone` (killed), answer /healthz.

        A worker started again after a kill listens before its app is up: a player whose connection lands
        on it meanwhile times out. Waiting here, not in a fixed sleep, is what makes every worker serve."""
        deadline = time.monotonic() + 60
        serving: set[int] = set()
        while time.monotonic() < deadline:
            # A new connection each time: with several workers, the kernel spreads them over all of them.
            try:
                answer = httpx.get(f"{self.url}/healthz", timeout=1)
                if answer.status_code == 200 and (pid := answer.json()["worker_pid"]) not in gone:
                    serving.add(pid)
                    if len(serving) == workers:
                        return
            except httpx.TransportError:
                time.sleep(0.1)
        raise RuntimeError(f"{len(serving)} of {workers} worker(s) came up")

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM, then the exit code once the server has drained and stopped.

        uvicorn re-raises a captured SIGTERM after its graceful shutdown, so a clean stop may exit with -15.
        """
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def descendants(self) -> list[tuple[int, str]]:
        """(pid, command line) of every process below the server, from /proc."""
        assert self.process is not None
        found: dict[int, tuple[int, str]] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                    command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                except (OSError, IndexError, ValueError):
                    continue  # gone meanwhile
                found[int(entry.name)] = (ppid, command.strip())
        below, todo = set(), [self.process.pid]
        while todo:
            parent = todo.pop()
            for pid, (ppid, _) in found.items():
                if ppid == parent and pid not in below:
                    below.add(pid)
                    todo.append(pid)
        return sorted((pid, found[pid][1]) for pid in below)

    def ledger_writers(self) -> list[tuple[int, str]]:
        return [
            (pid, command) for pid, command in self.descendants() if "adslot.ledger.writer_process" in command
        ]

    def clean_stops(self) -> int:
        """How many worker processes logged a completed drain."""
        return self.log.read_text(errors="replace").count(STOPPED_CLEANLY)


def served_setup(backend: str, tmp_path: Path) -> Iterator[tuple[Server, str, Settings]]:
    port = free_port()
    settings, schemas = make_settings(tmp_path, backend, port)
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
    yield server, key, settings
    if server.process and server.process.poll() is None:
        server.kill()
    if schemas:
        drop_schemas(schemas)


@dataclass
class Acked:
    """What the server acknowledged: ad request uuids and, per uuid, the result of its impression fires."""

    requests: list[str] = field(default_factory=list)
    impressions: dict[str, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


def load_until(server: Server, key: str, acked: Acked, stop_server: Callable[[], T], min_new: int) -> T:
    """Eight players request ads and fire impressions (some twice) until `stop_server` (kill or terminate).

    `stop_server` runs once at least `min_new` ad requests were acknowledged, so that every round stops a
    server under load however slow the machine is; its result is returned. A load that never gets there in
    60 s fails the test: a stop without load proves nothing.
    """
    stop = threading.Event()
    before = len(acked.requests)

    def player(seed: int) -> None:
        rng = random.Random(seed)
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
                    with acked.lock:
                        acked.requests.append(uuid)
                    for _ in range(rng.choice((1, 1, 2))):
                        p = client.get(f"{server.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                        if p.status_code == 200:
                            with acked.lock:
                                acked.impressions.setdefault(uuid, []).append(p.json()["data"]["result"])
                except httpx.TransportError:
                    return

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(player, seed) for seed in range(8)]
        deadline = time.monotonic() + 60
        while len(acked.requests) - before < min_new and time.monotonic() < deadline:
            time.sleep(0.01)
        result = stop_server()
        stop.set()
        for f in futures:
            f.result()
    made = len(acked.requests) - before
    assert made >= min_new, f"the load never got going: {made} of {min_new} ad requests acknowledged in 60 s"
    return result


def records_via_api(server: Server, key: str, uuids: list[str]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    with httpx.Client(timeout=10) as client:
        for uuid in uuids:
            r = client.get(f"{server.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": key})
            if r.status_code == 200:
                found[uuid] = r.json()["data"]
    return found
