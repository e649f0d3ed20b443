"""A real `adslot serve` process, set up through the CLI, for tests that kill, signal or scale it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from adslot.app import STOPPED_CLEANLY
from adslot.settings import Settings
from tests.conftest import drop_schemas, free_port, make_settings


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

    def terminate(self, timeout: float = 60) -> int:
        """SIGTERM, then the exit code once the server has drained and stopped.

        uvicorn re-raises a captured SIGTERM after its graceful shutdown, so a clean stop may exit with -15.
        """
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

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
