"""Storage that fails under a running adslot: every endpoint answers 503 storage_unavailable with
Retry-After (never a 500), and once the cause goes adslot serves again by itself with nothing it
acknowledged lost. Disk full: the data folder on a small tmpfs that the test fills (root only, as in CI)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROD_VENUE, LiveServer, free_port, play_time, start_server


@contextlib.contextmanager
def small_filesystem(path: Path, megabytes: int) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the data folder needs root (CI runs as root)")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)], check=False
    )
    if mounted.returncode != 0:
        pytest.skip("this machine does not let the test mount a tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(path: Path, filler: Path | None = None) -> Path:
    """Write (or add to) a file until the filesystem is full; return it."""
    filler = filler or path / "filler"
    with filler.open("ab", buffering=0) as out:
        for size in (65536, 4096, 512, 1):
            try:
                while True:
                    out.write(b"\0" * size)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler


def ad_request(client: httpx.Client, live: LiveServer) -> httpx.Response:
    assert live.keys
    return client.post(
        f"{live.url}/api/v1/ad/request",
        headers={"Ssp-Key": live.keys.production},
        json={"venue_id": PROD_VENUE, "play_time": play_time()},
    )


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["code"] == "storage_unavailable"


def test_a_full_disk_is_answered_503_everywhere_then_served_again_with_nothing_acknowledged_lost(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_filesystem(tmp_path / "data", 24) as data:
        live, _ = start_server(data, "sqlite")
        try:
            with httpx.Client(timeout=30) as client:
                acked = [ad_request(client, live).json()["data"]["ad_request_uuid"] for _ in range(5)]
                filler = fill(data)
                assert live.keys
                admin = {"Ssp-Key": live.keys.production_admin}
                pixels = iter(acked[:3])
                fired: list[str] = []

                def fill_then(send: Callable[[], httpx.Response]) -> httpx.Response:
                    """Until SQLite needs a page it cannot have, a write may still fit in what its files
                    hold: every answer is then a durable success, the disk is topped up, and it is sent again
                    until the 503 comes (never a 500)."""
                    for _ in range(200):
                        fill(data, filler)
                        response = send()
                        if response.status_code < 300:
                            continue
                        assert_unavailable(response)
                        return response
                    raise AssertionError("no 503 on a full disk")

                def ask() -> httpx.Response:
                    response = ad_request(client, live)
                    if response.status_code == 200:
                        acked.append(response.json()["data"]["ad_request_uuid"])
                    return response

                def fire() -> httpx.Response:
                    uuid = next(pixels)
                    response = client.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                    if response.status_code == 200:
                        fired.append(uuid)
                    return response

                made = iter(range(1000))

                def add_venue() -> httpx.Response:
                    venue = {"venue_id": f"full-{next(made)}", "name": "Full", "timezone": "UTC"}
                    return client.post(f"{live.url}/api/v1/venues", headers=admin, json=venue)

                fill_then(ask)
                fill_then(add_venue)
                with contextlib.suppress(StopIteration):
                    fill_then(fire)

                filler.unlink()  # the cause goes: adslot serves again by itself
                deadline = time.monotonic() + 30
                while (response := ad_request(client, live)).status_code != 200:
                    assert_unavailable(response)
                    assert time.monotonic() < deadline, "adslot did not recover"
                    time.sleep(0.2)
                acked.append(response.json()["data"]["ad_request_uuid"])
                assert add_venue().status_code == 201
                for uuid in acked[:3]:  # each pixel fired once: counted then, or now
                    again = client.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}")
                    assert again.json()["data"]["result"] == ("duplicate" if uuid in fired else "counted")
                for uuid in acked:  # nothing acknowledged was lost
                    record = client.get(
                        f"{live.url}/api/v1/ad/request/{uuid}", headers={"Ssp-Key": live.keys.production}
                    )
                    assert record.status_code == 200, (uuid, record.text)
        finally:
            live.stop()
    assert "Traceback" not in caplog.text


PG_BIN = Path("/usr/lib/postgresql")


@contextlib.contextmanager
def private_postgres() -> Iterator[tuple[str, Callable[[], None], Callable[[], None]]]:
    """A PostgreSQL server of this test's own, on a free port: (its URL, stop, start). Its folder is outside
    pytest's (which only root may enter), so that the postgres user can own it."""
    binaries = sorted(PG_BIN.glob("*/bin/pg_ctl"))
    if not binaries:
        pytest.skip("needs PostgreSQL's server binaries (Debian: postgresql) to start a private instance")
    bin_dir = binaries[-1].parent
    path = Path(tempfile.mkdtemp(prefix="adslot-pg-"))
    data = path / "pgdata"
    data.mkdir()
    as_postgres: list[str] = []
    if os.geteuid() == 0:  # initdb refuses root: run the server as Debian's postgres user
        subprocess.run(["chown", "-R", "postgres", str(path)], check=True)
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(
        [
            *as_postgres,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
        ],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off"

    def start() -> None:
        subprocess.run(
            [
                *as_postgres,
                str(bin_dir / "pg_ctl"),
                "-D",
                str(data),
                "-o",
                options,
                "-w",
                "-l",
                str(data / "log"),
                "start",
            ],
            check=True,
            capture_output=True,
        )

    def stop() -> None:
        subprocess.run(
            [*as_postgres, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
        )

    start()
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres", stop, start
    finally:
        stop()
        shutil.rmtree(path, ignore_errors=True)


def test_postgresql_unreachable_is_answered_503_everywhere_then_served_again(tmp_path: Path) -> None:
    with private_postgres() as (url, stop, start):
        live, _ = start_server(tmp_path / "data", "sqlite", ADSLOT_DATABASE_URL=url)
        try:
            assert live.keys
            admin = {"Ssp-Key": live.keys.production_admin}
            key = {"Ssp-Key": live.keys.production}
            with httpx.Client(timeout=30) as client:
                uuid = ad_request(client, live).json()["data"]["ad_request_uuid"]
                assert client.get(f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}").status_code == 200
                stop()
                window = {"from": str(play_time(-7200)), "to": str(play_time(7200))}
                answers = {
                    "ad request": lambda: ad_request(client, live),
                    "impression": lambda: client.get(
                        f"{live.url}/api/v1/ad/callback/?ad_request_uuid={uuid}"
                    ),
                    "inline VAST": lambda: client.get(f"{live.url}/api/v1/ad/vast/{uuid}"),
                    "record": lambda: client.get(f"{live.url}/api/v1/ad/request/{uuid}", headers=key),
                    "list venues": lambda: client.get(f"{live.url}/api/v1/venues", headers=admin),
                    "add venue": lambda: client.post(
                        f"{live.url}/api/v1/venues",
                        headers=admin,
                        json={"venue_id": "pg-down", "name": "PG down", "timezone": "UTC"},
                    ),
                    "import venues": lambda: client.post(
                        f"{live.url}/api/v1/venues/import",
                        headers={**admin, "Content-Type": "text/csv"},
                        content=b"venue_id,name,timezone\r\npg-import,PG import,UTC\r\n",
                    ),
                    "delivery report": lambda: client.get(
                        f"{live.url}/api/v1/reports/delivery", headers=admin, params=window
                    ),
                    "play log": lambda: client.get(
                        f"{live.url}/api/v1/reports/playlog",
                        headers=admin,
                        params={**window, "venue_id": PROD_VENUE},
                    ),
                }
                for name, send in answers.items():
                    started = time.monotonic()
                    response = send()
                    assert response.status_code == 503, (name, response.status_code, response.text)
                    assert_unavailable(response)
                    assert time.monotonic() - started < 10, f"{name} took too long to refuse"
                start()
                deadline = time.monotonic() + 60
                while (response := ad_request(client, live)).status_code != 200:
                    assert response.status_code == 503, response.text
                    assert time.monotonic() < deadline, "adslot did not recover"
                    time.sleep(0.5)
                for name in ("record", "list venues", "delivery report"):
                    deadline = time.monotonic() + 30
                    while (response := answers[name]()).status_code == 503:
                        assert time.monotonic() < deadline, f"{name} did not recover"
                        time.sleep(0.5)
                    assert response.status_code == 200, (name, response.text)
                again = answers["impression"]()
                assert again.json()["data"]["result"] == "duplicate", (
                    "the impression acknowledged before is kept"
                )
        finally:
            live.stop()
